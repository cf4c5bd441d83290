"""Errors of the HTTP API: a status, a stable code and one clear message, always as JSON.

    {"error": {"code": "unknown_flow", "message": "unknown flow 'helo' (did you mean 'hello'?)"}}

A bad request never becomes a 500: handlers raise `ApiError`, and the app maps FastAPI's
validation errors, unknown routes and the engine's own errors onto the same shape.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from engine.core.errors import BlockyardError
from engine.core.values import JsonDict
from engine.serve.logs import fields, get_logger


class ApiError(Exception):
    """A request the server refuses, with the HTTP status to answer."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


def not_found(what: str, message: str) -> ApiError:
    return ApiError(404, f"unknown_{what}", message)


def conflict(code: str, message: str) -> ApiError:
    return ApiError(409, code, message)


def body_too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "body_too_large",
        f"the request body is larger than {limit} bytes (server.max_body_bytes in blockyard.yaml)",
    )


def body(code: str, message: str, **extra: Any) -> JsonDict:
    return {"error": {"code": code, "message": message, **extra}}


def from_engine(exc: BlockyardError) -> ApiError:
    """The engine's own error as an API error, with the status and code its class declares
    (engine/core/errors.py: usage problems are the client's, 422 `invalid_request`)."""
    return ApiError(exc.http_status, exc.code, str(exc))


async def api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(
        body(exc.code, exc.message, **exc.extra), status_code=exc.status, headers=headers
    )


async def validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        first = next(e for e in errors if e.get("type") == "json_invalid")
        detail = (first.get("ctx") or {}).get("error", "")
        message = "the request body is not valid JSON" + (f": {detail}" if detail else "")
        return JSONResponse(body("malformed_json", message), status_code=400)
    if any(tuple(e.get("loc", ())) == ("body",) for e in errors):
        return JSONResponse(
            body(
                "invalid_request",
                "the request body must be a JSON object (sent with Content-Type: application/json)",
            ),
            status_code=422,
        )
    problems = [
        f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors
    ]
    return JSONResponse(
        body("invalid_request", "; ".join(problems) or "invalid request"), status_code=422
    )


async def http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(
        body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
    )


async def engine_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BlockyardError)
    return await api_error(_request, from_engine(exc))


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    get_logger().error(
        "internal_error", exc_info=exc, extra=fields(method=request.method, path=request.url.path)
    )
    return JSONResponse(
        body("internal", "internal error; the server log has the details"), status_code=500
    )
