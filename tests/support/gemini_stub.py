"""A loopback HTTP server speaking enough of the Gemini REST API (v1beta) for tests.

`POST /v1beta/models/{model}:generateContent` answers one GenerateContentResponse;
`:streamGenerateContent?alt=sse` answers server-sent events, text in pieces of 7 characters
(`chunk_delay` apart when a reply sets it) and each function call in a chunk of its own, as
Gemini sends them. Only the v1beta layout is served, the one the google provider fixes: any other
path (`/v1/models/...`, a version left to the SDK) gets a 404 naming it and is not recorded.
`GeminiStub(root="/gateway")` serves under a path, as a gateway would (`/gateway/v1beta/...`).
Point the real client at `stub.base_url` (ChatGoogleGenerativeAI's `base_url`, the root included),
queue replies, then assert on `stub.requests`:

    with GeminiStub() as stub:
        stub.queue(GeminiReply.structured_output({"greeting": "hi"}))
        ...
        assert stub.requests[0].headers["x-goog-api-key"] == "the key"

When the queue is empty the `default` reply is used (a 400 saying so).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@dataclass
class GeminiRequest:
    """One request the stub received (headers with lower-case names)."""

    path: str
    headers: dict[str, str]
    body: Any

    @property
    def model(self) -> str:
        return self.path.split("?")[0].rsplit("/", 1)[-1].split(":")[0]

    @property
    def streamed(self) -> bool:
        return ":streamGenerateContent" in self.path

    @property
    def contents(self) -> list[dict[str, Any]]:
        return list(self.body.get("contents", [])) if isinstance(self.body, dict) else []

    @property
    def declarations(self) -> list[dict[str, Any]]:
        """Every function declaration offered, across the request's tools."""
        tools = self.body.get("tools", []) if isinstance(self.body, dict) else []
        return [decl for tool in tools for decl in tool.get("functionDeclarations", [])]

    @property
    def calling_config(self) -> dict[str, Any]:
        config = self.body.get("toolConfig", {}) if isinstance(self.body, dict) else {}
        found: dict[str, Any] = config.get("functionCallingConfig", {})
        return found

    @property
    def forced_function(self) -> str | None:
        """The function the client requires: the one allowed name, or the only function offered."""
        allowed = self.calling_config.get("allowedFunctionNames") or []
        if len(allowed) == 1:
            return str(allowed[0])
        declarations = self.declarations
        return str(declarations[0]["name"]) if len(declarations) == 1 else None


@dataclass
class GeminiReply:
    """What the stub answers to one request. Build with the class methods."""

    status: int = 200
    text: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    structured: Any = None  # answered as a call of the forced function
    error: str | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0

    @classmethod
    def of_text(cls, text: str, *, chunk_delay: float = 0.0) -> GeminiReply:
        return cls(text=text, chunk_delay=chunk_delay)

    @classmethod
    def function_calls(
        cls, *calls: tuple[str, dict[str, Any]], text: str | None = None
    ) -> GeminiReply:
        return cls(calls=list(calls), text=text)

    @classmethod
    def structured_output(cls, value: Any) -> GeminiReply:
        return cls(structured=value)

    @classmethod
    def error_reply(
        cls, status: int, message: str = "stub error", *, delay: float = 0.0
    ) -> GeminiReply:
        return cls(status=status, error=message, delay=delay)

    @classmethod
    def slow(cls, delay: float) -> GeminiReply:
        return cls(text="too late", delay=delay)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class GeminiStub:
    """Threaded HTTP server on 127.0.0.1 with a random port; use as a context manager."""

    def __init__(self, root: str = "") -> None:
        self.root = root.rstrip("/")  # the path the API is served under, "" for the host's root
        self.requests: list[GeminiRequest] = []
        self.default = GeminiReply.error_reply(400, "gemini stub: no scripted reply left")
        self._queue: deque[GeminiReply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="gemini-stub",
            daemon=True,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.root}"

    def queue(self, *replies: GeminiReply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def __enter__(self) -> GeminiStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # wakes handlers sleeping in a scripted delay
        self._server.shutdown()
        self._server.server_close()

    def _next(self, request: GeminiRequest) -> GeminiReply:
        with self._lock:
            self.requests.append(request)
            return self._queue.popleft() if self._queue else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output quiet

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body: Any = json.loads(raw) if raw else None
                request = GeminiRequest(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                route = self.path.split("?")[0]
                if not route.startswith(f"{stub.root}/v1beta/models/") or not route.endswith(
                    (":generateContent", ":streamGenerateContent")
                ):
                    self._send(404, _error(404, f"no route {route}"))
                    return
                reply = stub._next(request)
                if reply.delay and stub._closing.wait(reply.delay):
                    return
                # the client gave up
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    if reply.error is not None:
                        self._send(reply.status, _error(reply.status, reply.error))
                    elif request.streamed:
                        self._stream(request, reply)
                    else:
                        self._send(200, _response(_parts(request, reply), request.model))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, request: GeminiRequest, reply: GeminiReply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                parts = _parts(request, reply)
                pieces: list[list[dict[str, Any]]] = []
                for part in parts:
                    if "text" in part:
                        pieces.extend([{"text": chunk}] for chunk in _pieces(part["text"]))
                    else:
                        pieces.append([part])
                for number, chunk in enumerate(pieces):
                    if number and reply.chunk_delay and stub._closing.wait(reply.chunk_delay):
                        return
                    last = number == len(pieces) - 1
                    event = _response(chunk, request.model, finished=last)
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\r\n\r\n")
                    self.wfile.flush()
                self.close_connection = True

        return Handler


def _parts(request: GeminiRequest, reply: GeminiReply) -> list[dict[str, Any]]:
    if reply.structured is not None:
        name = request.forced_function
        if name is None:
            return [{"text": json.dumps(reply.structured)}]
        return [{"functionCall": {"name": name, "args": reply.structured}}]
    parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in reply.calls]
    return parts


def _response(parts: list[dict[str, Any]], model: str, *, finished: bool = True) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finished:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "modelVersion": model,
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    }


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]
