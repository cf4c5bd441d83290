"""ASGI middleware: bearer-token check and one access-log line per request.

Plain ASGI (not BaseHTTPMiddleware) so streamed responses pass through untouched and the
per-request cost stays small under load. The log line has method, path, status and time —
never headers, query strings or bodies, where tokens and inputs live.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.serve.auth import authorized, is_public
from engine.serve.logs import fields, get_logger


class AuthMiddleware:
    """Refuse API calls without the bearer token (when the server has one)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.token is None or is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        if authorized(header, self.token):
            await self.app(scope, receive, send)
            return
        message = ("this server needs a token: send `Authorization: Bearer <BLOCKYARD_TOKEN>`" if header is None
                   else "the token is wrong")
        payload = json.dumps({"error": {"code": "unauthorized", "message": message}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


class AccessLogMiddleware:
    """`event=request method=GET path=/runs status=200 ms=3.1`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.log = get_logger()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status: dict[str, Any] = {"code": 500}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if self.log.isEnabledFor(20):
                self.log.info("request", extra=fields(method=scope["method"], path=scope["path"],
                                                      status=status["code"],
                                                      ms=round((time.perf_counter() - began) * 1000, 1)))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None
