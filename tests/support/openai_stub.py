"""A loopback HTTP server speaking enough of the OpenAI chat API for tests.

Scripted per test: queue replies (JSON content, tool calls, errors, delays, garbage), point a
real client (langchain-openai, the openai SDK, httpx) at `stub.base_url`, then assert on
`stub.requests`. Non-streaming and `stream: true` (server-sent events) are both served; a streamed reply comes in
pieces of 7 characters, `chunk_delay` apart when a reply sets it.

    with OpenAIStub() as stub:
        stub.queue(Reply.error(500), Reply.structured({"greeting": "hi"}))
        ...  # ChatOpenAI(base_url=stub.base_url, api_key="x", max_retries=0)
        assert stub.requests[0].headers["authorization"] == "Bearer x"

Any path ending in /chat/completions is answered (so Azure deployment URLs work too). When the
queue is empty the `default` reply is used (a 400 saying so, unless a test sets another one).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    """One request the stub received (headers with lower-case names)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def forced_tool(self) -> str | None:
        """The function the client asked for: a named tool_choice, or the only tool offered."""
        if not isinstance(self.body, dict):
            return None
        choice = self.body.get("tool_choice")
        if isinstance(choice, dict):
            return str(choice.get("function", {}).get("name"))
        tools = self.body.get("tools") or []
        if len(tools) == 1:
            return str(tools[0]["function"]["name"])
        return None


@dataclass
class Reply:
    """What the stub answers to one request. Build with the class methods."""

    status: int = 200
    content: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments text)
    structured: Any = None  # answered as a call of the requested tool (or as content)
    raw: bytes | None = None  # sent verbatim (garbage, HTML error pages)
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0  # streamed replies: the pause before each chunk after the first
    responder: Callable[[RecordedRequest], Reply] | None = None
    # the token counts reported: (prompt, completion, cached, reasoning); with a stream, only when the
    # client asks (`stream_options.include_usage`), in a last chunk without choices, as OpenAI does
    usage: tuple[int, int, int, int] | None = (10, 5, 0, 0)  # None: a server that reports no usage

    @classmethod
    def text(cls, content: str, *, delay: float = 0.0) -> Reply:
        return cls(content=content, delay=delay)

    @classmethod
    def json_content(cls, value: Any, *, delay: float = 0.0) -> Reply:
        """Assistant content that is the JSON text of value (no tool call)."""
        return cls(content=json.dumps(value), delay=delay)

    @classmethod
    def tool_call(cls, name: str, arguments: Any, *, delay: float = 0.0) -> Reply:
        """One tool call; arguments may be a value (sent as JSON) or raw argument text."""
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return cls(tool_calls=[(name, text)], delay=delay)

    @classmethod
    def structured_output(cls, value: Any, *, delay: float = 0.0) -> Reply:
        """A call of whatever function the request forces (content JSON if it offers none)."""
        return cls(structured=value, delay=delay)

    @classmethod
    def error_reply(
        cls,
        status: int,
        message: str = "stub error",
        *,
        kind: str = "server_error",
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        return cls(
            status=status,
            error={"message": message, "type": kind, "code": None},
            headers=dict(headers or {}),
            delay=delay,
        )

    @classmethod
    def garbage(
        cls,
        body: bytes = b"<html>not json</html>",
        *,
        status: int = 200,
        content_type: str = "text/html",
    ) -> Reply:
        return cls(status=status, raw=body, content_type=content_type)

    @classmethod
    def dynamic(cls, responder: Callable[[RecordedRequest], Reply]) -> Reply:
        """Decide per request (e.g. echo something the client sent)."""
        return cls(responder=responder)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # bursts of concurrent clients (the default backlog of 5 refuses them)


class OpenAIStub:
    """Threaded HTTP server on 127.0.0.1 with a random port; use as a context manager."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.default: Reply = Reply.error_reply(
            400, "openai stub: no scripted reply left", kind="invalid_request_error"
        )
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        # a short poll interval keeps shutdown (once per test) fast
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="openai-stub",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        """Append replies, answered in order, one per request."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def start(self) -> OpenAIStub:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping in a scripted delay
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            reply = self._queue.popleft() if self._queue else self.default
        while reply.responder is not None:
            reply = reply.responder(request)
        return reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output quiet

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                recorded = RecordedRequest(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                if not self.path.split("?")[0].endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}', "application/json", {})
                    return
                reply = stub._next(recorded)
                if reply.delay and stub._closing.wait(reply.delay):
                    return
                # the client may have given up (its timeout was shorter than the scripted delay)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(recorded, reply)

            def _answer(self, request: RecordedRequest, reply: Reply) -> None:
                if reply.raw is not None:
                    self._send(reply.status, reply.raw, reply.content_type, reply.headers)
                elif reply.error is not None:
                    data = json.dumps({"error": reply.error}).encode()
                    self._send(reply.status, data, "application/json", reply.headers)
                elif isinstance(request.body, dict) and request.body.get("stream"):
                    self._stream(request, reply)
                else:
                    data = json.dumps(_completion(request, reply)).encode()
                    self._send(reply.status, data, "application/json", reply.headers)

            def _send(
                self, status: int, data: bytes, content_type: str, headers: dict[str, str]
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, request: RecordedRequest, reply: Reply) -> None:
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for number, chunk in enumerate(_chunks(request, reply)):
                    if number and reply.chunk_delay and stub._closing.wait(reply.chunk_delay):
                        return
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _message(request: RecordedRequest, reply: Reply) -> tuple[str | None, list[tuple[str, str]]]:
    if reply.structured is not None:
        name = request.forced_tool
        if name is None:
            return json.dumps(reply.structured), []
        return None, [(name, json.dumps(reply.structured))]
    return reply.content, list(reply.tool_calls)


def _model(request: RecordedRequest) -> str:
    return (
        str(request.body.get("model", "stub-model"))
        if isinstance(request.body, dict)
        else "stub-model"
    )


def _completion(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    content, calls = _message(request, reply)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": _model(request),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        **({"usage": _usage(reply.usage)} if reply.usage is not None else {}),
    }


def _usage(usage: tuple[int, int, int, int]) -> dict[str, Any]:
    prompt, completion, cached, reasoning = usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _chunks(request: RecordedRequest, reply: Reply) -> Iterator[dict[str, Any]]:
    content, calls = _message(request, reply)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": _model(request),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(content or ""):
        yield chunk({"content": piece})
    for i, (name, args) in enumerate(calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in _pieces(args):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if calls else "stop")
    options = request.body.get("stream_options") if isinstance(request.body, dict) else None
    if isinstance(options, dict) and options.get("include_usage") and reply.usage is not None:
        yield {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": _model(request),
            "choices": [],
            "usage": _usage(reply.usage),
        }


def _pieces(text: str, size: int = 7) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]
