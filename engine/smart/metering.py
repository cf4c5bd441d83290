"""The model calls of a smart block's prediction, as `model_call` records (engine/models/calls.py).

DSPy makes its calls itself, in a worker thread, and keeps each in its LM's `history`: the
reply's `usage` (LiteLLM's OpenAI-shaped counts) and when it ended. After the prediction the
new entries become ModelCalls, reported on the event loop (a recorder writes events, which is
not for worker threads). A call's latency is the time since the previous call ended (or the
prediction began): DSPy calls one at a time within a prediction. The offline mock's LM reports zero
usage; its counts are the mock's deterministic ones (engine/models/providers/mock.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from engine.core.usage import ModelCall
from engine.models.calls import Tokens
from engine.models.pricing import Price
from engine.models.providers.mock import mock_tokens


def calls_since(
    lm: Any,
    seen: int,
    began_wall: float,
    *,
    provider: str,
    model: str,
    profile: str,
    block: str,
    price: Price | None,
) -> list[ModelCall]:
    """The ModelCalls of the entries `lm.history` got after its first `seen` ones."""
    entries = list(getattr(lm, "history", None) or [])[seen:]
    calls: list[ModelCall] = []
    previous = began_wall
    for entry in entries:
        ended = _ended(entry, previous)
        # DSPy's DummyLM reports zeros: the mock's counts are its own
        tokens = _mock_tokens(entry) if provider == "mock" else _tokens(entry.get("usage"))
        counts = tokens or Tokens()
        cost = price.cost(counts.input, counts.output, counts.cached) if price is not None else None
        calls.append(
            ModelCall(
                provider=provider,
                model=model,
                purpose="smart",
                latency_ms=max(0.0, (ended - previous) * 1000),
                input_tokens=counts.input,
                output_tokens=counts.output,
                cached_tokens=counts.cached,
                reasoning_tokens=counts.reasoning,
                cost_usd=cost,
                price_source=price.source if cost is not None and price is not None else None,
                profile=profile,
                block=block,
            )
        )
        previous = ended
    return calls


def _ended(entry: Mapping[str, Any], fallback: float) -> float:
    stamp = entry.get("timestamp")
    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else time.time()
    except ValueError:
        return fallback


def _tokens(usage: Any) -> Tokens | None:
    if not isinstance(usage, Mapping) or not usage:
        return None
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    return Tokens(
        prompt,
        completion,
        cached if isinstance(cached, int) else None,
        reasoning if isinstance(reasoning, int) else None,
    )


def _mock_tokens(entry: Mapping[str, Any]) -> Tokens:
    asked = sum(
        len(str(message.get("content", "")))
        for message in entry.get("messages") or []
        if isinstance(message, Mapping)
    )
    said = sum(len(str(output)) for output in entry.get("outputs") or [])
    return Tokens(mock_tokens(asked), mock_tokens(said), 0, 0)
