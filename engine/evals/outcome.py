"""Everything one `blockyard eval` found, as the reports show it and the exit code judges it.

Exit 1 when an eval missed a threshold on the working tree, or — with `--fail-on regression` — when
an eval got worse than on the base beyond the tolerance; else 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.usage import Spend, money
from engine.core.values import JsonDict
from engine.evals.cache import CacheStats
from engine.evals.compare import Comparison
from engine.evals.results import EvalResult


@dataclass
class Outcome:
    head: list[EvalResult]
    head_label: str
    base_label: str | None = None  # None: no --base
    comparisons: list[Comparison] = field(default_factory=list)
    # (eval, target) not run: the same on both sides
    unchanged: list[tuple[str, str]] = field(default_factory=list)
    cache: CacheStats | None = None  # None: --no-cache
    cache_folder: str | None = None
    tolerance: float = 0.0
    fail_on_regression: bool = False
    seconds: float = 0.0

    @property
    def results(self) -> list[EvalResult]:
        """Every eval result of both sides."""
        return [*self.head, *(c.base for c in self.comparisons if c.base is not None)]

    @property
    def misses(self) -> list[tuple[str, str]]:
        """(eval, why) of every threshold the working tree missed."""
        return [(result.name, miss) for result in self.head for miss in result.misses]

    @property
    def regressions(self) -> list[tuple[str, str]]:
        return [(c.name, why) for c in self.comparisons for why in c.regressions(self.tolerance)]

    @property
    def exit_code(self) -> int:
        if self.misses:
            return 1
        return 1 if self.fail_on_regression and self.regressions else 0

    @property
    def cached_calls(self) -> int:
        return sum(case.cached_calls for result in self.results for case in result.cases)

    @property
    def model_calls(self) -> int:
        return sum(
            case.spend.model_calls + case.judge_spend.model_calls
            for result in self.results
            for case in result.cases
        )

    @property
    def saved_usd(self) -> float:
        return sum(case.saved_usd for result in self.results for case in result.cases)

    def spend(self, results: list[EvalResult]) -> Spend:
        total = Spend()
        for result in results:
            total.merge(result.spend)
            total.merge(result.judge_spend)
        return total

    def cache_line(self) -> str:
        """`cache: 12 of 14 model calls answered (saved $0.02); .blockyard/cache/models`"""
        if self.cache is None:
            return "cache: off (--no-cache)"
        saved = f", saved {money(self.saved_usd)}" if self.saved_usd else ""
        return (
            f"cache: {self.cached_calls} of {self.model_calls} model calls answered from the cache{saved}; "
            f"{self.cache.writes} replies kept in {self.cache_folder}"
        )

    def as_dict(self) -> JsonDict:
        return {
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "head": self.head_label,
            "base": self.base_label,
            "evals": [result.as_dict() for result in self.head],
            "base_evals": [c.base.as_dict() for c in self.comparisons if c.base is not None],
            "comparison": [c.as_dict(self.tolerance) for c in self.comparisons],
            "unchanged": [{"eval": name, "target": target} for name, target in self.unchanged],
            "misses": [{"eval": name, "miss": why} for name, why in self.misses],
            "regressions": [{"eval": name, "regression": why} for name, why in self.regressions],
            "tolerance": self.tolerance,
            "cache": {
                **self.cache.as_dict(),
                "folder": self.cache_folder,
                "cached_calls": self.cached_calls,
                "model_calls": self.model_calls,
                "saved_usd": round(self.saved_usd, 8),
            }
            if self.cache is not None
            else None,
            "seconds": round(self.seconds, 3),
        }
