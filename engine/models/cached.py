"""Model replies kept by what was asked, for `blockyard eval` (docs/evals.md, "The response cache").

A cache is set for the calls made inside a block of code (`caching`, a context variable like the call
recorder's of engine/models/calls.py), so only what `blockyard eval` runs uses one: a flow run or a
served run never does. `Metered` asks it before each call: the key is everything that decides the reply
— the provider, the model, the profile's generation settings (`generation_settings`), and the whole
request: system and user prompts, a thread's history, the block's inputs and output schema, the repair
turns; for an agent turn its messages, tools and whether it must answer. The store (engine/evals/cache.py)
keeps each reply as JSON under a digest of that key. Nothing secret is in either: requests carry no API
key (a key is read by the provider as it calls), headers are left out of the key (they may hold one), and
an endpoint is named without its user and password.

A scripted mock (a run's script, a profile's `replies`) is never cached: its answer depends on the order
of the calls, not only on what they ask.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from engine.core.values import JsonDict
from engine.models.agentic import TokenSink, TurnRequest
from engine.models.base import Candidate, StructuredRequest, Turn
from engine.models.secrets import public_url
from engine.models.streaming import text_field
from engine.spec import ModelProfile

FORMAT = 1  # of the keys and entries: a change makes every earlier entry miss, never misread
_WORDS = re.compile(r"\S+\s*")


class ReplyCache(Protocol):
    """Where replies are kept (engine/evals/cache.py): by key, a JSON-ready mapping. A miss makes the
    caller the one that asks: the same key asked meanwhile waits for its `put` (or `abandon`) rather than
    asking the model too — the base and the head of `blockyard eval --base` often ask the same."""

    async def get(self, key: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The entry kept for `key`, or None: then the caller asks the model, and puts or abandons."""

    def put(self, key: Mapping[str, Any], entry: Mapping[str, Any]) -> None:
        """Keep `entry` for `key`."""

    def abandon(self, key: Mapping[str, Any]) -> None:
        """The call for `key` after a miss failed: nothing to keep."""


_cache: ContextVar[ReplyCache | None] = ContextVar("blockyard_reply_cache", default=None)


@contextmanager
def caching(cache: ReplyCache | None) -> Iterator[None]:
    """Model calls made inside the block (and the tasks it starts) are answered from `cache` when it
    has their reply, and their replies are kept there."""
    token = _cache.set(cache)
    try:
        yield
    finally:
        _cache.reset(token)


def current() -> ReplyCache | None:
    return _cache.get()


def generation_settings(profile: ModelProfile) -> JsonDict:
    """What of a model profile decides its replies (part of every key): not its name, key variable,
    headers, timeout or retries, which change how a reply is fetched, not what it says."""
    return {
        "base_url": public_url(profile.base_url),
        "temperature": profile.temperature,
        "max_tokens": profile.max_tokens,
        "api_version": profile.api_version,
    }


def is_cacheable(generator: Any) -> bool:
    """A scripted mock answers by the order of the calls: never cached."""
    return not getattr(generator, "scripted", False)


def structured_key(
    provider: str,
    model: str,
    settings: Mapping[str, Any],
    request: StructuredRequest,
    turns: tuple[Turn, ...],
) -> JsonDict:
    return {
        "format": FORMAT,
        "call": "structured",
        "provider": provider,
        "model": model,
        "settings": dict(settings),
        "purpose": request.purpose,
        "block": request.block,
        "system": request.system,
        "user": request.user,
        "history": [list(pair) for pair in request.history],
        "inputs": request.inputs,
        "schema": request.output_schema,
        "turns": [[turn.role, turn.text] for turn in turns],
    }


def agent_key(
    provider: str, model: str, settings: Mapping[str, Any], request: TurnRequest
) -> JsonDict:
    return {
        "format": FORMAT,
        "call": "agent",
        "provider": provider,
        "model": model,
        "settings": dict(settings),
        "block": request.block,
        "messages": [_message(item) for item in request.messages],
        "tools": list(request.tools),
        "answer_tool": request.answer_tool,
        "force_answer": request.force_answer,
        "inputs": request.inputs,
    }


def _message(message: Any) -> JsonDict:
    """What a conversation message says (its type, text, calls), without the ids and metadata a server
    adds that say nothing about it."""
    return {
        "type": getattr(message, "type", type(message).__name__),
        "content": getattr(message, "content", None),
        "tool_calls": [
            {"name": call.get("name"), "args": call.get("args"), "id": call.get("id")}
            for call in getattr(message, "tool_calls", None) or []
        ],
        "tool_call_id": getattr(message, "tool_call_id", None),
        "name": getattr(message, "name", None),
    }


# ---- entries --------------------------------------------------------------------------------------


def candidate_entry(found: Candidate) -> JsonDict:
    return {"value": found.value, "text": found.text, "parsed": found.parsed}


def candidate_of(entry: Mapping[str, Any]) -> Candidate:
    return Candidate(
        value=entry.get("value"), text=entry.get("text"), parsed=bool(entry.get("parsed"))
    )


def message_entry(reply: Any) -> JsonDict:
    """An agent turn's reply (an AIMessage) by its own fields."""
    return {
        "content": reply.content,
        "tool_calls": [dict(call) for call in reply.tool_calls],
        "invalid_tool_calls": [dict(call) for call in reply.invalid_tool_calls],
        "usage_metadata": dict(reply.usage_metadata) if reply.usage_metadata else None,
        "id": reply.id,
    }


def message_of(entry: Mapping[str, Any]) -> Any:
    # LangChain: loaded already, an agent is running
    from langchain_core.messages import AIMessage

    return AIMessage(
        content=entry.get("content") or "",
        tool_calls=list(entry.get("tool_calls") or []),
        invalid_tool_calls=list(entry.get("invalid_tool_calls") or []),
        usage_metadata=entry.get("usage_metadata"),
        id=entry.get("id"),
    )


def replay_structured(found: Candidate, request: StructuredRequest) -> None:
    """Stream a cached reply's text to `request.on_token` as the call would have: the single text output,
    or a plain-text reply (engine/models/streaming.py)."""
    if request.on_token is None:
        return
    field = text_field(request.output_schema)
    value = found.value.get(field) if field is not None and isinstance(found.value, dict) else None
    text = (
        value
        if isinstance(value, str)
        else found.text
        if found.text is not None and not found.text.lstrip().startswith("{")
        else None
    )
    replay_text(text or "", request.on_token)


def replay_text(text: Any, on_token: TokenSink | None) -> None:
    if on_token is None or not isinstance(text, str):
        return
    for word in _WORDS.findall(text):
        on_token(word)
