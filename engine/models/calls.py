"""Every model call measured: latency, time to first token, the tokens the provider reported, the
price — handed as a `ModelCall` to whoever records the calls of the current step or run.

`Metered` wraps a provider (a Generator that may also run agent turns), so every path that calls a
model — llm and decide blocks, their repair retries, agent turns, thread naming, compose — is
measured in one place. The recorder is found in a context variable (`recording`): the block step
that runs an executor sets one that writes `model_call` events and counts the run's budget
(engine/nodes/spend.py); the runtime sets one for calls outside steps (a thread's name). Without
a recorder a call is simply not recorded (a model used outside any run).

A recorder may refuse a call before it is made (`before`: a budget spent already) or fail the
step after it (`after`: the call passed a limit): its exception propagates as the call's.

`blockyard eval` also sets a response cache (engine/models/cached.py): a reply it holds is given
without a call, recorded like one and marked `cached`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from engine.core.usage import ModelCall
from engine.core.values import JsonDict
from engine.models import cached
from engine.models.agentic import TokenSink, TurnRequest
from engine.models.base import Candidate, Generator, StructuredRequest, Turn
from engine.models.errors import ModelError
from engine.models.pricing import Price


class CallRecorder(Protocol):
    def before(self, purpose: str) -> None:
        """Called before a model call; raising refuses it."""

    def after(self, call: ModelCall) -> None:
        """Called after a model call (failed ones too); raising fails the step."""


_recorder: ContextVar[CallRecorder | None] = ContextVar("blockyard_model_calls", default=None)


@contextmanager
def recording(recorder: CallRecorder | None) -> Iterator[None]:
    """Model calls made inside the block (and tasks it starts) go to `recorder`."""
    token = _recorder.set(recorder)
    try:
        yield
    finally:
        _recorder.reset(token)


def current() -> CallRecorder | None:
    return _recorder.get()


@dataclass(frozen=True)
class Tokens:
    """The token counts of one reply, as its provider reported them (None: not reported)."""

    input: int | None = None
    output: int | None = None
    cached: int | None = None
    reasoning: int | None = None


def tokens_of(message: Any) -> Tokens | None:
    """The counts in a LangChain AI message's `usage_metadata` (every LangChain chat model fills it
    the same way: OpenAI, Azure, Anthropic, Gemini), or None when the reply had none."""
    usage = getattr(message, "usage_metadata", None)
    if not isinstance(usage, Mapping):
        return None
    input_details = usage.get("input_token_details") or {}
    output_details = usage.get("output_token_details") or {}
    return Tokens(
        _count(usage.get("input_tokens")),
        _count(usage.get("output_tokens")),
        _count(input_details.get("cache_read")),
        _count(output_details.get("reasoning")),
    )


def _kept_tokens(entry: Mapping[str, Any]) -> Tokens | None:
    usage = entry.get("usage")
    return (
        Tokens(
            **{key: _count(usage.get(key)) for key in ("input", "output", "cached", "reasoning")}
        )
        if isinstance(usage, Mapping)
        else None
    )


def _hit(entry: Mapping[str, Any]) -> JsonDict:
    """What a model_call event adds for a reply from the response cache: that it was cached, and how long
    the call took when it was made (its own latency is the replay's). Its tokens and cost are the
    reply's: what the call costs with the model (docs/evals.md, "The response cache")."""
    return {"cached": True, "original_latency_ms": entry.get("latency_ms")}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class _Clock:
    """Latency and time to first token of one call."""

    def __init__(self, on_token: TokenSink | None) -> None:
        self.began = time.perf_counter()
        self.first: float | None = None
        self._sink = on_token

    def sink(self) -> TokenSink | None:
        if self._sink is None:
            return None
        downstream = self._sink

        def on_token(text: str) -> None:
            if self.first is None and text:
                self.first = time.perf_counter()
            downstream(text)

        return on_token

    def latency_ms(self) -> float:
        return (time.perf_counter() - self.began) * 1000

    def ttft_ms(self) -> float | None:
        return (self.first - self.began) * 1000 if self.first is not None else None


class Metered:
    """A provider whose every call is measured and recorded (see the module's docstring)."""

    def __init__(
        self,
        inner: Generator,
        *,
        profile: str,
        price: Price | None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.profile = profile
        self.price = price
        # the profile's generation settings: part of a reply's key in a response cache (engine/models/cached.py)
        self.settings = dict(settings or {})

    def __getattr__(
        self, name: str
    ) -> Any:  # what else callers read of the provider (its `what`, ...)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"Metered({self.inner!r})"

    async def generate(self, request: StructuredRequest, turns: tuple[Turn, ...]) -> Candidate:
        recorder = _recorder.get()
        purpose = "repair" if turns else request.purpose
        cache = self._cache()
        if recorder is None and cache is None:
            return await self.inner.generate(request, turns)
        if recorder is not None:
            recorder.before(purpose)
        clock = _Clock(request.on_token)
        if request.on_token is not None:
            request = dataclasses.replace(request, on_token=clock.sink())
        key = (
            cached.structured_key(self.provider, self.model, self.settings, request, turns)
            if cache
            else {}
        )
        entry = await cache.get(key) if cache is not None else None
        if entry is not None:
            # a kept reply: no call, the same event (marked cached), the same streamed text
            found = dataclasses.replace(
                cached.candidate_of(entry["reply"]), usage=_kept_tokens(entry)
            )
            cached.replay_structured(found, request)
            if recorder is not None:
                recorder.after(
                    self._call(purpose, request.block, clock, found.usage, extra=_hit(entry))
                )
            return found
        try:
            found = await self.inner.generate(request, turns)
        except BaseException as exc:
            if cache is not None:
                cache.abandon(key)  # no reply to keep: a call waiting for this one asks on its own
            if recorder is not None and isinstance(exc, ModelError):
                recorder.after(self._call(purpose, request.block, clock, None, error=exc))
            raise
        # its latency before the cache writes
        call = self._call(purpose, request.block, clock, found.usage)
        if cache is not None:
            cache.put(key, self._entry(cached.candidate_entry(found), call))
        if recorder is not None:
            recorder.after(call)
        return found

    async def turn(self, request: TurnRequest, on_token: TokenSink | None = None) -> Any:
        recorder = _recorder.get()
        cache = self._cache()
        if recorder is None and cache is None:
            return await self.inner.turn(request, on_token)  # type: ignore[attr-defined]
        if recorder is not None:
            recorder.before("agent")
        clock = _Clock(on_token)
        extra: JsonDict = {"turn": request.turn}
        key = cached.agent_key(self.provider, self.model, self.settings, request) if cache else {}
        entry = await cache.get(key) if cache is not None else None
        if entry is not None:
            reply = cached.message_of(entry["reply"])
            cached.replay_text(reply.content, clock.sink())
            if recorder is not None:
                recorder.after(
                    self._call(
                        "agent",
                        request.block,
                        clock,
                        tokens_of(reply),
                        extra={**extra, **_hit(entry)},
                    )
                )
            return reply
        try:
            reply = await self.inner.turn(request, clock.sink())  # type: ignore[attr-defined]
        except BaseException as exc:
            if cache is not None:
                cache.abandon(key)
            if recorder is not None and isinstance(exc, ModelError):
                recorder.after(
                    self._call("agent", request.block, clock, None, error=exc, extra=extra)
                )
            raise
        call = self._call("agent", request.block, clock, tokens_of(reply), extra=extra)
        if cache is not None:
            cache.put(key, self._entry(cached.message_entry(reply), call))
        if recorder is not None:
            recorder.after(call)
        return reply

    def _cache(self) -> cached.ReplyCache | None:
        """The response cache of these calls (only `blockyard eval` sets one), unless this provider's
        replies depend on more than the request."""
        cache = cached.current()
        return cache if cache is not None and cached.is_cacheable(self.inner) else None

    def _entry(self, reply: JsonDict, call: ModelCall) -> JsonDict:
        """What a response cache keeps of a call: its reply, its token counts and how long it took (the
        key says what was asked: engine/models/cached.py)."""
        usage = {
            "input": call.input_tokens,
            "output": call.output_tokens,
            "cached": call.cached_tokens,
            "reasoning": call.reasoning_tokens,
        }
        data = call.as_data()
        return {
            "reply": reply,
            "usage": usage,
            "latency_ms": data["latency_ms"],
            "ttft_ms": data["ttft_ms"],
            "what": {
                "provider": self.provider,
                "model": self.model,
                "profile": self.profile,
                "purpose": call.purpose,
                "block": call.block,
            },
        }

    def _call(
        self,
        purpose: str,
        block: str,
        clock: _Clock,
        tokens: Tokens | None,
        *,
        error: ModelError | None = None,
        extra: JsonDict | None = None,
    ) -> ModelCall:
        counts = tokens or Tokens()
        cost = (
            self.price.cost(counts.input, counts.output, counts.cached)
            if self.price is not None
            else None
        )
        return ModelCall(
            provider=self.provider,
            model=self.model,
            purpose=purpose,
            latency_ms=clock.latency_ms(),
            ttft_ms=clock.ttft_ms(),
            input_tokens=counts.input,
            output_tokens=counts.output,
            cached_tokens=counts.cached,
            reasoning_tokens=counts.reasoning,
            cost_usd=cost,
            price_source=self.price.source if cost is not None and self.price is not None else None,
            profile=self.profile,
            block=block,
            ok=error is None,
            error=str(error)[:300] if error is not None else None,
            extra=extra or {},
        )
