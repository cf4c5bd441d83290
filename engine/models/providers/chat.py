"""A Generator over any LangChain chat model that supports tool calling.

Structured output is asked for by offering one function whose parameters are the output schema
and requiring the model to call it (tool calling is what OpenAI, Azure, vLLM, Ollama, LM Studio
and llama.cpp servers all implement; `response_format: json_schema` is not). Servers that
ignore the tool and answer in text still work: the text is parsed as JSON, and the repair
retry shows the schema again.

The key is read from the environment on every call; the client is cached per key fingerprint,
so a rotated key takes effect without a restart and no key is kept outside the client's SecretStr.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from engine.models.agentic import TokenSink, TurnRequest
from engine.models.base import Candidate, StructuredRequest, Turn
from engine.models.calls import tokens_of
from engine.models.errors import ModelError, failure_kind, status_kind, status_of
from engine.models.secrets import fingerprint, public_url, read_key, redact
from engine.models.streaming import ReplyStream, text_field

_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_-]")
_MESSAGE_LIMIT = 300

ClientFactory = Callable[[str], Any]  # key -> a LangChain chat model


class ChatGenerator:
    """Generator of the openai, azure, anthropic and google providers."""

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        profile: str,
        factory: ClientFactory,
        env: Mapping[str, str],
        key_env: str,
        key_required: bool = True,
        base_url: str | None = None,
        timeout: float | None = None,
        tool_choice: Callable[[str], Any] = lambda name: "required",
    ) -> None:
        self.provider = provider
        self.model = model
        self.profile = profile
        self.base_url = public_url(base_url)
        self.timeout = timeout
        self._factory = factory
        self._env = env
        self._key_env = key_env
        self._key_required = key_required
        self._tool_choice = tool_choice
        self._client: tuple[str, Any] | None = None

    def __repr__(self) -> str:
        return (
            f"ChatGenerator(provider={self.provider!r}, model={self.model!r}, profile={self.profile!r}, "
            f"base_url={self.base_url!r}, key_env={self._key_env!r})"
        )

    @property
    def what(self) -> str:
        """How messages name this model: profile, provider, model."""
        return f"model profile '{self.profile}' ({self.provider}, model '{self.model}')"

    async def generate(self, request: StructuredRequest, turns: tuple[Turn, ...]) -> Candidate:
        key = self._key()
        name = function_name(request.block)
        tool = {
            "type": "function",
            "function": {
                "name": name,
                "description": f"Return the outputs of block '{request.block}'.",
                "parameters": request.output_schema,
            },
        }
        bound = self._chat(key).bind_tools([tool], tool_choice=self._tool_choice(name))
        try:
            if request.on_token is None:
                reply = await bound.ainvoke(messages(request, turns))
            else:
                stream = ReplyStream(
                    request.on_token, tool=name, field=text_field(request.output_schema)
                )
                reply = await _streamed(bound, messages(request, turns), stream)
        except Exception as exc:  # every provider failure becomes one clear ModelError
            raise self._failure(exc, key, request) from None
        return dataclasses.replace(candidate(reply, name), usage=tokens_of(reply))

    async def turn(self, request: TurnRequest, on_token: TokenSink | None = None) -> Any:
        """One agent turn: the conversation with the request's tools bound, streamed when `on_token`
        is given (text goes to it as it arrives; tool-call arguments are reassembled)."""
        key = self._key()
        choice = self._tool_choice(request.answer_tool) if request.force_answer else None
        chat = self._chat(key)
        bound = chat.bind_tools(list(request.tools), tool_choice=choice) if request.tools else chat
        try:
            if on_token is None:
                return await bound.ainvoke(list(request.messages))
            stream = ReplyStream(
                on_token, tool=request.answer_tool, field=text_field(request.answer_schema)
            )
            return await _streamed(bound, list(request.messages), stream)
        except Exception as exc:  # every provider failure becomes one clear ModelError
            raise self._failure(exc, key, request) from None

    def _key(self) -> str:
        if not self._key_required and not self._env.get(self._key_env, "").strip():
            return "not-needed"  # local OpenAI-compatible servers ignore it; the SDK insists on one
        return read_key(self._env, self._key_env, what=self.what)

    def _chat(self, key: str) -> Any:
        digest = fingerprint(key)
        if self._client is None or self._client[0] != digest:
            self._client = (digest, self._factory(key))
        return self._client[1]

    def _failure(
        self, exc: Exception, key: str, request: StructuredRequest | TurnRequest
    ) -> ModelError:
        where = f"flow '{request.flow}', step '{request.step}': {self.what}"
        status = status_of(exc) or getattr(exc, "status_code", None)
        detail = redact(_server_message(exc), key)
        kind = failure_kind(exc)
        if isinstance(status, int):
            kind = kind or status_kind(status)
            return ModelError(
                f"{where}: {_status_text(status, self._key_env)} (HTTP {status}: {detail})",
                provider=self.provider,
                model=self.model,
                kind=kind,
                status=status,
            )
        if kind == "timeout":
            after = f" after {self.timeout:g}s" if self.timeout else ""
            return ModelError(
                f"{where}: the request timed out{after}",
                provider=self.provider,
                model=self.model,
                kind=kind,
            )
        if kind == "connection":
            target = self.base_url or "the provider"
            return ModelError(
                f"{where}: cannot connect to {target} ({detail})",
                provider=self.provider,
                model=self.model,
                kind=kind,
            )
        if isinstance(exc, ValueError | TypeError):
            return ModelError(
                f"{where}: the server's reply is not a chat completion (check base_url "
                f"{self.base_url or '(default)'}): {detail}",
                provider=self.provider,
                model=self.model,
            )
        return ModelError(
            f"{where}: {type(exc).__name__}: {detail}", provider=self.provider, model=self.model
        )


async def _streamed(bound: Any, chat: list[Any], stream: ReplyStream) -> Any:
    """Stream a reply, handing its text to `stream` (content, and the text field inside the
    arguments of the outputs function), and return it as one AIMessage."""
    # LangChain: only when a model runs
    from langchain_core.messages import message_chunk_to_message

    whole: Any = None
    async for chunk in bound.astream(chat):
        stream.content(text_of(chunk.content))
        for piece in getattr(chunk, "tool_call_chunks", None) or ():
            stream.arguments(piece.get("index"), piece.get("name"), piece.get("args"))
        whole = chunk if whole is None else whole + chunk
    if whole is None:
        raise ValueError("the server sent an empty stream")
    return _strict(message_chunk_to_message(whole), whole.tool_call_chunks)


def _strict(message: Any, chunks: list[Any]) -> Any:
    """LangChain parses streamed tool-call arguments leniently (a cut-off `{"a": "b` becomes
    {"a": "b"}); arguments that are not one complete JSON object make an invalid call instead,
    as they do without streaming, so the model hears that its call was broken."""
    raw = {chunk.get("id"): chunk.get("args") for chunk in chunks if chunk.get("id")}
    valid: list[Any] = []
    invalid = list(message.invalid_tool_calls)
    for call in message.tool_calls:
        text = raw.get(call.get("id"))
        try:
            parsed = json.loads(text) if text else {}
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            valid.append(call)
        else:
            invalid.append(
                {
                    "type": "invalid_tool_call",
                    "name": call.get("name"),
                    "args": text,
                    "id": call.get("id"),
                    "error": "the arguments are not a JSON object",
                }
            )
    if len(valid) == len(message.tool_calls):
        return message
    return message.model_copy(update={"tool_calls": valid, "invalid_tool_calls": invalid})


def function_name(block: str) -> str:
    """The function offered to the model: the block id, as a valid function name."""
    return _NOT_A_NAME.sub("_", block)[:64] or "output"


def messages(request: StructuredRequest, turns: tuple[Turn, ...]) -> list[Any]:
    """The chat: system, the conversation so far (in a thread's turn), user (the inputs as JSON when
    the block has no user prompt), repair turns."""
    # LangChain: when a model runs
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        SystemMessage,
    )

    chat: list[Any] = []
    if request.system:
        chat.append(SystemMessage(request.system))
    for role, text in request.history:  # a conversation thread's earlier turns, oldest first
        chat.append(HumanMessage(text) if role == "user" else AIMessage(text))
    user = request.user
    if not user:
        user = "Inputs:\n" + json.dumps(request.inputs, ensure_ascii=False, default=str)
    chat.append(HumanMessage(user))
    for turn in turns:
        chat.append(AIMessage(turn.text) if turn.role == "assistant" else HumanMessage(turn.text))
    return chat


def candidate(reply: Any, name: str) -> Candidate:
    """The structured value in an AI message: the call of our function, else its text."""
    calls = list(getattr(reply, "tool_calls", None) or [])
    chosen = next((c for c in calls if c.get("name") == name), calls[0] if calls else None)
    if chosen is not None:
        return Candidate.of_value(chosen.get("args"))
    invalid = list(getattr(reply, "invalid_tool_calls", None) or [])
    if invalid:
        return Candidate.of_text(str(invalid[0].get("args") or ""))
    return Candidate.of_text(text_of(getattr(reply, "content", "")))


def text_of(content: Any) -> str:
    """The text of a message's content (a string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content or "")


def _status_text(status: int, key_env: str) -> str:
    if status == 401:
        return f"the server rejected the API key from ${key_env}"
    if status == 403:
        return "permission denied for this model or key"
    if status == 404:
        return "not found: check the model name and base_url"
    if status == 429:
        return "rate limited"
    if status >= 500:
        return "the server failed"
    return "the request was rejected"


def _server_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
    # google-genai's errors carry the server's message as `message`, on the error or the one it wraps
    found = message or getattr(exc, "message", None) or getattr(exc.__cause__, "message", None)
    text = str(found or exc).strip() or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "..."
