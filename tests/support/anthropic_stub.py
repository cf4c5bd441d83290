"""A loopback HTTP server speaking enough of Anthropic's Messages API for tests.

`POST /v1/messages` answers one message; with `"stream": true` in the request it answers
server-sent events the way Anthropic sends them (message_start, a content block's start, deltas
and stop, message_delta, message_stop): text in pieces of 7 characters, `chunk_delay` apart when a
reply sets it, and each tool call's input as JSON deltas. Any other path gets a 404 naming it and is
not recorded. `AnthropicStub(root="/gateway")` serves under a path, as a gateway would. Point the
real client at `stub.base_url` (ChatAnthropic's `base_url`), queue replies, then assert on
`stub.requests`:

    with AnthropicStub() as stub:
        stub.queue(AnthropicReply.structured_output({"greeting": "hi"}))
        ...
        assert stub.requests[0].headers["x-api-key"] == "the key"

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

# Anthropic's error types by HTTP status (docs.anthropic.com, "Errors")
_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
USAGE = {"input_tokens": 10, "output_tokens": 5}


@dataclass
class AnthropicRequest:
    """One request the stub received (headers with lower-case names)."""

    path: str
    headers: dict[str, str]
    body: Any

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools", [])) if isinstance(self.body, dict) else []

    @property
    def forced_tool(self) -> str | None:
        """The tool the client requires (`tool_choice: {type: tool, name}`), else None."""
        choice = self.body.get("tool_choice") if isinstance(self.body, dict) else None
        return (
            str(choice["name"])
            if isinstance(choice, dict) and choice.get("type") == "tool"
            else None
        )


@dataclass
class AnthropicReply:
    """What the stub answers to one request. Build with the class methods."""

    status: int = 200
    text: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    structured: Any = None  # answered as a call of the forced tool
    error: str | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0

    @classmethod
    def of_text(cls, text: str, *, chunk_delay: float = 0.0) -> AnthropicReply:
        return cls(text=text, chunk_delay=chunk_delay)

    @classmethod
    def tool_calls(
        cls, *calls: tuple[str, dict[str, Any]], text: str | None = None
    ) -> AnthropicReply:
        return cls(calls=list(calls), text=text)

    @classmethod
    def structured_output(cls, value: Any) -> AnthropicReply:
        return cls(structured=value)

    @classmethod
    def error_reply(
        cls, status: int, message: str = "stub error", *, delay: float = 0.0
    ) -> AnthropicReply:
        return cls(status=status, error=message, delay=delay)

    @classmethod
    def slow(cls, delay: float) -> AnthropicReply:
        return cls(text="too late", delay=delay)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class AnthropicStub:
    """Threaded HTTP server on 127.0.0.1 with a random port; use as a context manager."""

    def __init__(self, root: str = "") -> None:
        self.root = root.rstrip("/")  # the path the API is served under, "" for the host's root
        self.requests: list[AnthropicRequest] = []
        self.default = AnthropicReply.error_reply(400, "anthropic stub: no scripted reply left")
        self._queue: deque[AnthropicReply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="anthropic-stub",
            daemon=True,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.root}"

    def queue(self, *replies: AnthropicReply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def __enter__(self) -> AnthropicStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # wakes handlers sleeping in a scripted delay
        self._server.shutdown()
        self._server.server_close()

    def _next(self, request: AnthropicRequest) -> AnthropicReply:
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
                request = AnthropicRequest(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                route = self.path.split("?")[0]
                if route != f"{stub.root}/v1/messages":
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
                        blocks = _blocks(request, reply)
                        self._send(
                            200,
                            {
                                **_message(request),
                                "content": blocks,
                                "stop_reason": _stop(blocks),
                                "usage": USAGE,
                            },
                        )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _event(self, name: str, data: dict[str, Any]) -> None:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def _stream(self, request: AnthropicRequest, reply: AnthropicReply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                blocks = _blocks(request, reply)
                self._event(
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            **_message(request),
                            "content": [],
                            "stop_reason": None,
                            "usage": {"input_tokens": USAGE["input_tokens"], "output_tokens": 1},
                        },
                    },
                )
                for index, block in enumerate(blocks):
                    start: dict[str, Any]
                    if block["type"] == "text":
                        start = {"type": "text", "text": ""}
                        deltas = [
                            {"type": "text_delta", "text": piece}
                            for piece in _pieces(block["text"])
                        ]
                    else:
                        start = {**block, "input": {}}
                        deltas = [
                            {"type": "input_json_delta", "partial_json": piece}
                            for piece in _pieces(json.dumps(block["input"]))
                        ]
                    self._event(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": start},
                    )
                    for number, delta in enumerate(deltas):
                        if number and reply.chunk_delay and stub._closing.wait(reply.chunk_delay):
                            return
                        self._event(
                            "content_block_delta",
                            {"type": "content_block_delta", "index": index, "delta": delta},
                        )
                    self._event(
                        "content_block_stop", {"type": "content_block_stop", "index": index}
                    )
                self._event(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": _stop(blocks), "stop_sequence": None},
                        "usage": {"output_tokens": USAGE["output_tokens"]},
                    },
                )
                self._event("message_stop", {"type": "message_stop"})
                self.close_connection = True

        return Handler


def _message(request: AnthropicRequest) -> dict[str, Any]:
    model = request.body.get("model", "") if isinstance(request.body, dict) else ""
    return {
        "id": f"msg_{len(model)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_sequence": None,
    }


def _blocks(request: AnthropicRequest, reply: AnthropicReply) -> list[dict[str, Any]]:
    if reply.structured is not None:
        name = request.forced_tool
        if name is None:
            return [{"type": "text", "text": json.dumps(reply.structured)}]
        return [{"type": "tool_use", "id": "toolu_0", "name": name, "input": reply.structured}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{number}", "name": name, "input": args}
        for number, (name, args) in enumerate(reply.calls)
    ]
    return blocks


def _stop(blocks: list[dict[str, Any]]) -> str:
    return "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"


def _error(status: int, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": _ERRORS.get(status, "api_error"), "message": message},
    }


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]
