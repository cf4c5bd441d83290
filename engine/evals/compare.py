"""Base against head: what a change did to each eval, case by case and in total.

Cases are matched by name (the working tree's eval files give both sides the same cases). A case's
change is `pass→fail`, `fail→pass`, `pass`, `fail` (the same on both), or `new` when the base could not
run it. An eval regresses when the head's pass rate or mean score is lower than the base's by more than
the tolerance (`--tolerance`, a share: 0.05 is 5 points of pass rate or 0.05 of score).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.values import JsonDict
from engine.evals.results import CaseResult, EvalResult, percent

PASS_TO_FAIL, FAIL_TO_PASS, NEW = "pass→fail", "fail→pass", "new"


@dataclass(frozen=True)
class CaseChange:
    case: str
    base: CaseResult | None
    head: CaseResult

    @property
    def change(self) -> str:
        if self.base is None:
            return NEW
        if self.base.passed != self.head.passed:
            return PASS_TO_FAIL if self.base.passed else FAIL_TO_PASS
        return "pass" if self.head.passed else "fail"

    @property
    def score_delta(self) -> float | None:
        return None if self.base is None else self.head.score - self.base.score

    @property
    def cost_delta(self) -> float | None:
        return None if self.base is None else self.head.spend.cost_usd - self.base.spend.cost_usd

    @property
    def latency_delta_ms(self) -> float | None:
        return None if self.base is None else self.head.latency_ms - self.base.latency_ms

    @property
    def changed(self) -> bool:
        return self.change in (PASS_TO_FAIL, FAIL_TO_PASS) or bool(self.score_delta)

    def as_dict(self) -> JsonDict:
        return {
            "case": self.case,
            "change": self.change,
            "base": {
                "passed": self.base.passed,
                "score": round(self.base.score, 4),
                "cost_usd": self.base.spend.cost_usd,
            }
            if self.base is not None
            else None,
            "head": {
                "passed": self.head.passed,
                "score": round(self.head.score, 4),
                "cost_usd": self.head.spend.cost_usd,
            },
            "score_delta": _round(self.score_delta),
            "cost_delta_usd": self.cost_delta,
            "latency_delta_ms": _round(self.latency_delta_ms, 1),
        }


@dataclass
class Comparison:
    """One eval on both sides (`base` None: it could not run there, e.g. its flow is new)."""

    head: EvalResult
    base: EvalResult | None
    cases: list[CaseChange] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.head.name

    @property
    def comparable(self) -> bool:
        return self.base is not None and self.base.problem is None and bool(self.base.cases)

    @property
    def pass_rate_delta(self) -> float | None:
        return (
            self.head.pass_rate - self.base.pass_rate
            if self.comparable and self.base is not None
            else None
        )

    @property
    def mean_score_delta(self) -> float | None:
        return (
            self.head.mean_score - self.base.mean_score
            if self.comparable and self.base is not None
            else None
        )

    @property
    def cost_delta(self) -> float | None:
        if not self.comparable or self.base is None:
            return None
        return self.head.spend.cost_usd - self.base.spend.cost_usd

    @property
    def latency_delta_ms(self) -> float | None:
        if not self.comparable or self.base is None:
            return None
        return self.head.mean_latency_ms - self.base.mean_latency_ms

    def regressions(self, tolerance: float) -> list[str]:
        """Why the head is worse than the base beyond `tolerance` ([] when it is not)."""
        if not self.comparable or self.base is None:
            return []
        found = []
        if self.head.pass_rate < self.base.pass_rate - tolerance - 1e-9:
            found.append(
                f"pass rate fell from {percent(self.base.pass_rate)} to {percent(self.head.pass_rate)}"
            )
        if self.head.mean_score < self.base.mean_score - tolerance - 1e-9:
            found.append(
                f"mean score fell from {self.base.mean_score:.2f} to {self.head.mean_score:.2f}"
            )
        return found

    def as_dict(self, tolerance: float) -> JsonDict:
        return {
            "eval": self.name,
            "target": self.head.target,
            "comparable": self.comparable,
            "pass_rate_delta": _round(self.pass_rate_delta),
            "mean_score_delta": _round(self.mean_score_delta),
            "cost_delta_usd": self.cost_delta,
            "latency_delta_ms": _round(self.latency_delta_ms, 1),
            "regressions": self.regressions(tolerance),
            "cases": [change.as_dict() for change in self.cases],
        }


def compare(head: EvalResult, base: EvalResult | None) -> Comparison:
    found = Comparison(head, base)
    for case in head.cases:
        other = base.case(case.case) if base is not None and base.problem is None else None
        found.cases.append(CaseChange(case.case, other, case))
    return found


def _round(value: float | None, digits: int = 4) -> float | None:
    return round(value, digits) if value is not None else None
