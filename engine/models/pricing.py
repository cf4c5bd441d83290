"""What a model call costs: the profile's own `pricing:`, else LiteLLM's published price table.

We keep no price list of our own: prices change every month, and LiteLLM's table
(`model_prices_and_context_window_backup.json`, shipped inside the `litellm` package: the `dspy`
and `prices` extras install it) is the one the ecosystem keeps current. It is read as JSON —
litellm itself is never imported for it — once per process, on the first call that needs it.

A price is used only when it certainly applies: the table is consulted for a profile that talks
to the provider's own endpoint (no `base_url`; Azure's resource endpoints are Azure's own). A model
behind a gateway or a local server (`base_url` set) may cost anything, so its price is unknown
unless the profile states it. The mock costs nothing. An unknown price is None, never a guess.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.core.values import JsonDict
from engine.spec import ModelProfile

TABLE_FILE = "model_prices_and_context_window_backup.json"
# how LiteLLM names a provider in its table: its key prefix and its `litellm_provider` values
_PREFIX = {"openai": "", "azure": "azure/", "anthropic": "", "google": "gemini/"}
_TABLE_PROVIDER = {
    "openai": {"openai"},
    "azure": {"azure"},
    "anthropic": {"anthropic"},
    "google": {"gemini", "vertex_ai-language-models"},
}


@dataclass(frozen=True)
class Price:
    """US dollars per token."""

    input: float
    output: float
    cached_input: float | None
    source: str  # profile | litellm | mock

    def cost(
        self, input_tokens: int | None, output_tokens: int | None, cached_tokens: int | None
    ) -> float | None:
        """The cost of a call, or None when the provider did not report its token counts."""
        if input_tokens is None or output_tokens is None:
            return None
        cached = min(cached_tokens or 0, input_tokens)
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        return (
            (input_tokens - cached) * self.input
            + cached * cached_rate
            + output_tokens * self.output
        )


FREE = Price(0.0, 0.0, 0.0, "mock")


def price_of(profile: ModelProfile, model: str) -> Price | None:
    """The price of calls of `model` through `profile`, or None when it is not known for certain."""
    if profile.pricing is not None:
        stated = profile.pricing
        return Price(
            stated.input_per_mtok / 1e6,
            stated.output_per_mtok / 1e6,
            stated.cached_input_per_mtok / 1e6
            if stated.cached_input_per_mtok is not None
            else None,
            "profile",
        )
    if profile.provider == "mock":
        return FREE
    if profile.base_url is not None and profile.provider != "azure":
        return None  # a gateway or a local server: not the provider's list price
    return _TABLE.price(profile.provider, model)


class _Table:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: JsonDict | None = None
        self._prices: dict[tuple[str, str], Price | None] = {}

    def price(self, provider: str, model: str) -> Price | None:
        key = (provider, model)
        with self._lock:
            if key not in self._prices:
                self._prices[key] = self._find(provider, model)
            return self._prices[key]

    def _find(self, provider: str, model: str) -> Price | None:
        data = self._load()
        names = [_PREFIX.get(provider, "") + model, model]
        for name in dict.fromkeys(names):
            entry = data.get(name)
            if not isinstance(entry, dict) or entry.get(
                "litellm_provider"
            ) not in _TABLE_PROVIDER.get(provider, ()):
                continue
            rate_in, rate_out = (
                entry.get("input_cost_per_token"),
                entry.get("output_cost_per_token"),
            )
            if not isinstance(rate_in, int | float) or not isinstance(rate_out, int | float):
                continue
            cached = entry.get("cache_read_input_token_cost")
            return Price(
                float(rate_in),
                float(rate_out),
                float(cached) if isinstance(cached, int | float) else None,
                "litellm",
            )
        return None

    def _load(self) -> JsonDict:
        if self._data is None:
            self._data = _read_table()
        return self._data


def table_path() -> Path | None:
    """Where LiteLLM's price table is installed, found without importing litellm (a second's import)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / TABLE_FILE
        if path.is_file():
            return path
    return None


def _read_table() -> JsonDict:
    path = table_path()
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_TABLE = _Table()
