"""ASGI middleware: Host check, CORS, bearer-token check, request body limit, one access-log line per request.

Plain ASGI (not BaseHTTPMiddleware) so streamed responses pass through untouched and the
per-request cost stays small under load. The log line has method, path, status and time —
never headers, query strings or bodies, where tokens and inputs live.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.serve.auth import api_key_matches, authorized, is_public
from engine.serve.hosts import check_applies, host_allowed
from engine.serve.langgraph_api.mount import under
from engine.serve.logs import fields, get_logger
from engine.serve.problems import ApiError, body_too_large


class AuthMiddleware:
    """Refuse API calls without the bearer token (when the server has one).

    Under the LangGraph API's prefix the token may also come as `X-Api-Key: <token>`, the header langgraph-sdk
    clients send their api key in; `<prefix>/ok` is public there, like /healthz."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        langgraph_prefix: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.app = app
        self.token = token
        self.langgraph_prefix = langgraph_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.token is None or is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        prefix = self.langgraph_prefix()
        if authorized(header, self.token) or (
            under(scope["path"], prefix)
            and (
                scope["path"] == f"{prefix}/ok"
                or api_key_matches(_header(scope, b"x-api-key"), self.token)
            )
        ):
            await self.app(scope, receive, send)
            return
        message = (
            "this server needs a token: send `Authorization: Bearer <BLOCKYARD_TOKEN>`"
            if header is None
            else "the token is wrong"
        )
        await _problem(
            send, ApiError(401, "unauthorized", message), [(b"www-authenticate", b"Bearer")]
        )


# What browser clients of both APIs send and read: the token (either header), JSON bodies, a stream's resumption
# point, the W3C trace context of a page instrumented with OpenTelemetry (a run continues its trace:
# docs/observability.md), the MCP protocol version a client sends after `initialize` (/mcp is stateless: no
# session id, docs/mcp.md); and the headers naming a created run (langgraph-sdk clients follow `Location` to
# join its stream).
CORS_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
CORS_HEADERS = (
    "Authorization",
    "X-Api-Key",
    "Content-Type",
    "Last-Event-ID",
    "traceparent",
    "tracestate",
    "Mcp-Protocol-Version",
)
CORS_EXPOSED = ("Location", "Content-Location")


class CorsMiddleware:
    """CORS for the pages of `server.cors_origins` (a chat UI on another origin calling the server from the browser).

    Starlette's CORSMiddleware does the work; it is rebuilt when the list changes, so a reload applies it. It sits
    before the token check, because a preflight (OPTIONS) carries no credentials: it is answered here, while the
    actual request still needs the token, and its 401 carries the CORS headers so the page can read it. A request
    whose Origin is not listed passes by untouched: no CORS headers at all, as when the list is empty."""

    def __init__(self, app: ASGIApp, origins: Callable[[], Sequence[str]]) -> None:
        self.app = app
        self.origins = origins
        self._built: tuple[tuple[str, ...], CORSMiddleware] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origins = tuple(self.origins())
        if scope["type"] != "http" or _header(scope, b"origin") not in origins:
            await self.app(scope, receive, send)
            return
        await self._cors(origins)(scope, receive, send)

    def _cors(self, origins: tuple[str, ...]) -> CORSMiddleware:
        if self._built is None or self._built[0] != origins:
            self._built = (
                origins,
                CORSMiddleware(
                    self.app,
                    allow_origins=origins,
                    allow_methods=CORS_METHODS,
                    allow_headers=CORS_HEADERS,
                    expose_headers=CORS_EXPOSED,
                ),
            )
        return self._built[1]


class HostMiddleware:
    """Answer only Host headers that name this server (DNS rebinding): 421 `host_not_allowed` otherwise.

    /healthz is exempt: it tells nothing private, and probes often address the server by IP.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        bound_host: str,
        bound_port: int,
        allowed: Callable[[], Sequence[str]],
    ) -> None:
        self.app = app
        self.token = token
        self.bound_host = bound_host
        self.bound_port = bound_port
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        allowed = self.allowed()
        if (
            scope["type"] != "http"
            or scope["path"] == "/healthz"
            or not check_applies(self.token, allowed)
        ):
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"host")
        bound = scope.get("server")  # the socket's real address: right even when the port was 0
        port = bound[1] if bound and bound[1] is not None else self.bound_port
        if host_allowed(header, allowed, self.bound_host, port):
            await self.app(scope, receive, send)
            return
        shown = "no Host header" if not header else f"Host '{header[:100]}'"
        await _problem(
            send,
            ApiError(
                421,
                "host_not_allowed",
                f"this server does not answer {shown}: call it by its own address, "
                "or add the name to server.allowed_hosts in blockyard.yaml",
            ),
        )


class BodyLimitMiddleware:
    """413 `body_too_large` for a body over the limit, counted while it streams in.

    A declared Content-Length over the limit is refused before anything is read; a chunked body
    is refused as soon as the bytes received pass the limit, so it is never held whole.
    """

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            await _problem(send, body_too_large(limit))
            return
        received = 0
        started = False

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise body_too_large(limit)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, sending)
        except ApiError as exc:  # raised by `limited` where no handler turned it into a response
            if started or exc.code != "body_too_large":
                raise
            await _problem(send, exc)


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
                self.log.info(
                    "request",
                    extra=fields(
                        method=scope["method"],
                        path=scope["path"],
                        status=status["code"],
                        ms=round((time.perf_counter() - began) * 1000, 1),
                    ),
                )


async def _problem(
    send: Send, problem: ApiError, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer with the API's one error shape, before the app has seen the request."""
    payload = json.dumps(
        {"error": {"code": problem.code, "message": problem.message}},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": problem.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None
