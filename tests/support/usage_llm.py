"""A loopback OpenAI-compatible chat server that reports token usage, as vLLM, Ollama or OpenAI do: for
tests of what the engine records of model calls (engine/core/usage.py) and exports (engine/telemetry).

    with UsageLLM() as llm:
        ...  # blockyard.yaml: models: {default: {provider: openai, base_url: <llm.base_url>, name: usage-model}}
        assert [call.usage for call in llm.calls] == [...]

Every answer carries its `usage` (prompt, completion, cached and reasoning tokens): a plain reply in its
body, a streamed one (`stream: true`) in a last chunk with no choices — only when the request asked with
`stream_options: {include_usage: true}`, as the OpenAI API does. The counts are deterministic and differ
from call to call: input tokens are the words of every message plus 4 per message, output tokens the
words of the answer plus 1; `cached` and `reasoning` are fixed parts of them (a test sets the ratios).
`calls` records each answer with what it reported and the messages the request sent.

The answer follows the request: a call of the function the request forces (`tool_choice`), else of one
named `final_answer` (an agent's answer tool) if offered, else of the first tool, with arguments made up
from the function's JSON Schema; plain text when no tools are offered.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER_TOOL = "final_answer"


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def as_openai(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }


@dataclass(frozen=True)
class Call:
    """One answered request: whether it streamed, whether it asked for usage, what usage it was told."""

    model: str
    streamed: bool
    include_usage: bool
    usage: Usage
    reported: bool  # the usage was sent (always, unless a stream did not ask for it)
    tool: str | None  # the function the answer called, if any
    # what the request sent: each message's role and text, in order
    messages: tuple[tuple[str, str], ...] = ()


class UsageLLM:
    """The server, on 127.0.0.1 at a free port; a context manager."""

    def __init__(self, *, cached_ratio: float = 0.25, reasoning_ratio: float = 0.0) -> None:
        self.cached_ratio = cached_ratio
        self.reasoning_ratio = reasoning_ratio
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="usage-llm", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> UsageLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reported(self) -> list[Usage]:
        """The usage each call reported, in the order the calls were answered."""
        with self._lock:
            return [call.usage for call in self.calls if call.reported]

    # ---- answers --------------------------------------------------------------------------------------

    def answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], Usage, str | None]:
        """The assistant message for a request, its usage, and the function it calls (if any)."""
        messages = body.get("messages") or []
        words = sum(
            len(_text(message.get("content")).split()) + 4
            for message in messages
            if isinstance(message, dict)
        )
        tool = _chosen_tool(body)
        if tool is None:
            content = f"answer to {len(messages)} messages"
            message: dict[str, Any] = {"role": "assistant", "content": content}
            said = content
        else:
            name, schema = tool
            arguments = json.dumps(_sample(schema, name))
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{len(self.calls)}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ],
            }
            said = arguments
        output = len(said.split()) + 1
        usage = Usage(
            words, output, int(words * self.cached_ratio), int(output * self.reasoning_ratio)
        )
        return message, usage, tool[0] if tool is not None else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if not self.path.split("?")[0].endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._send(400, {"error": {"message": "the body is not JSON"}})
                    return
                message, usage, tool = llm.answer(body)
                model = str(body.get("model") or "usage-model")
                streamed = bool(body.get("stream"))
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                with llm._lock:
                    llm.calls.append(
                        Call(
                            model,
                            streamed,
                            include,
                            usage,
                            not streamed or include,
                            tool,
                            _sent(body),
                        )
                    )
                if streamed:
                    self._stream(model, message, usage if include else None)
                    return
                finish = "tool_calls" if tool else "stop"
                self._send(
                    200,
                    {
                        "id": "chatcmpl-usage",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": model,
                        "usage": usage.as_openai(),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    },
                )

            def _send(self, status: int, data: dict[str, Any]) -> None:
                encoded = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)

            def _stream(self, model: str, message: dict[str, Any], usage: Usage | None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {
                    "id": "chatcmpl-usage",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                }
                # every chunk but the last, as OpenAI sends
                extra = {"usage": None} if usage is not None else {}

                def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
                    data = {
                        **base,
                        **extra,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }
                    self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")

                chunk({"role": "assistant", "content": ""})
                content = message.get("content")
                if content:
                    for start in range(0, len(content), 7):
                        chunk({"content": content[start : start + 7]})
                for index, call in enumerate(message.get("tool_calls") or []):
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""},
                                }
                            ]
                        }
                    )
                    arguments = call["function"]["arguments"]
                    for start in range(0, len(arguments), 16):
                        chunk(
                            {
                                "tool_calls": [
                                    {
                                        "index": index,
                                        "function": {"arguments": arguments[start : start + 16]},
                                    }
                                ]
                            }
                        )
                chunk({}, "tool_calls" if message.get("tool_calls") else "stop")
                if usage is not None:
                    last = {**base, "choices": [], "usage": usage.as_openai()}
                    self.wfile.write(b"data: " + json.dumps(last).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _sent(body: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(message.get("role")), _text(message.get("content")))
        for message in body.get("messages") or []
        if isinstance(message, dict)
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _chosen_tool(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    tools = [
        tool.get("function") or {} for tool in body.get("tools") or [] if isinstance(tool, dict)
    ]
    if not tools:
        return None
    by_name = {str(tool.get("name")): tool.get("parameters") or {} for tool in tools}
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        forced = str((choice.get("function") or {}).get("name"))
        if forced in by_name:
            return forced, by_name[forced]
    if ANSWER_TOOL in by_name:
        return ANSWER_TOOL, by_name[ANSWER_TOOL]
    first = str(tools[0].get("name"))
    return first, by_name[first]


def _sample(schema: Any, name: str) -> Any:
    """A value valid against a plain JSON Schema (the object of a function's parameters)."""
    if not isinstance(schema, dict):
        return f"{name} value"
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _sample(schema[key][0], name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((each for each in kind if each != "null"), "string")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {key: _sample(value, key) for key, value in properties.items()}
    if kind == "array":
        return [_sample(schema.get("items") or {"type": "string"}, name)]
    if kind == "integer":
        return 3
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return f"{name} value from the usage server"


if __name__ == "__main__":
    # a process of its own (bench/bench_telemetry.py): its answers are no CPU of the process a bench measures
    import sys  # only the standalone server needs it

    with UsageLLM() as served:
        print(served.port, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            sys.exit(0)
