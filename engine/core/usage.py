"""What model calls cost: one call's usage (`ModelCall`, the data of a `model_call` event) and the
totals of a run, a step or a thread turn (`Spend`).

No LangChain here: providers hand in the counts they read from their replies
(engine/models/calls.py), prices come from engine/models/pricing.py. Token counts a provider did
not report are None, never 0; a cost whose price is unknown is None, never a guess
(docs/observability.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.core.values import JsonDict

# the token counts of a model_call event, in the order they are shown
TOKEN_KEYS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")
# the totals kept per run (the `runs` table's columns of the same names)
SPEND_KEYS = ("model_calls", *TOKEN_KEYS, "cost_usd", "unpriced_calls")


@dataclass
class Spend:
    """Totals over model calls. `cost_usd` adds the calls whose price is known; `unpriced_calls`
    counts the others, so a total is never shown as complete when it is not."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    @property
    def tokens(self) -> int:
        """Input plus output tokens (cached and reasoning tokens are parts of those)."""
        return self.input_tokens + self.output_tokens

    def add(self, data: Mapping[str, Any]) -> None:
        """Count one model_call event's data."""
        self.model_calls += 1
        for key in TOKEN_KEYS:
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, key, getattr(self, key) + value)
        cost = data.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost_usd += float(cost)
        else:
            self.unpriced_calls += 1

    def merge(self, other: Spend) -> None:
        for key in SPEND_KEYS:
            setattr(self, key, getattr(self, key) + getattr(other, key))

    def copy(self) -> Spend:
        return Spend(**self.as_dict())

    def as_dict(self) -> JsonDict:
        return {key: getattr(self, key) for key in SPEND_KEYS}

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Spend:
        """From a mapping with the SPEND_KEYS (a `runs` row, a JSON answer); missing keys count 0."""
        spend = cls()
        for key in SPEND_KEYS:
            value = values.get(key)
            if value is not None:
                setattr(spend, key, float(value) if key == "cost_usd" else int(value))
        return spend

    @property
    def cost_known(self) -> bool:
        return self.unpriced_calls == 0

    def cost_text(self) -> str:
        """How a total cost is shown: `$0.0123`; `unknown` when no call had a price; `≥ $0.01 (2 calls
        unpriced)` when some had none; `-` without model calls."""
        if self.model_calls == 0:
            return "-"
        if self.unpriced_calls == self.model_calls:
            return "unknown"
        text = money(self.cost_usd)
        if self.unpriced_calls:
            return f">= {text} ({self.unpriced_calls} unpriced)"
        return text


def money(value: float) -> str:
    """US dollars with the digits that matter for model calls (fractions of a cent are common)."""
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    if value >= 0.01:
        return f"${value:.4f}"
    return f"${value:.6f}"


@dataclass(frozen=True)
class ModelCall:
    """One call of a model, as the `model_call` event's data (docs/observability.md)."""

    provider: str
    model: str
    purpose: str  # block | repair | agent | thread_name | compose | judge | smart
    latency_ms: float
    ttft_ms: float | None = None  # time to the first streamed piece; None without streaming
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    price_source: str | None = None  # profile | litellm; None when the price is unknown
    profile: str | None = None
    block: str | None = None
    ok: bool = True
    error: str | None = None
    extra: JsonDict = field(default_factory=dict)  # e.g. an agent's `turn`

    def as_data(self) -> JsonDict:
        data: JsonDict = {
            "block": self.block,
            "purpose": self.purpose,
            "provider": self.provider,
            "model": self.model,
            "profile": self.profile,
            **{key: getattr(self, key) for key in TOKEN_KEYS},
            "latency_ms": round(self.latency_ms, 1),
            "ttft_ms": round(self.ttft_ms, 1) if self.ttft_ms is not None else None,
            "cost_usd": self.cost_usd,
            "price_source": self.price_source,
            "ok": self.ok,
        }
        if self.error is not None:
            data["error"] = self.error
        data.update(self.extra)
        return data
