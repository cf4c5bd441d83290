"""What an eval found: each assertion's check, each case's result, each eval's totals and thresholds.

A case passes when its run finished and every assertion passed; its score is the mean of its
assertions' scores (1 or 0, a judge's its own), 0 when it did not finish. An eval's pass rate is the
share of its cases that pass, its mean score the mean of theirs; its thresholds (default: pass rate 1)
decide whether it passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.usage import Spend, money
from engine.core.values import JsonDict
from engine.spec.evals import Thresholds

DEFAULT_THRESHOLDS = Thresholds(pass_rate=1.0)


@dataclass
class Check:
    """One assertion checked on one case."""

    kind: str  # equals | contains | regex | json_schema | expr | judge | max_cost_usd | max_tokens | max_latency
    label: str  # how reports name it: `contains 'Ada' (greeting)`
    passed: bool
    score: float
    message: str = ""  # why it failed ("" when it passed)
    reasoning: str | None = None  # a judge's

    def as_dict(self) -> JsonDict:
        data: JsonDict = {
            "kind": self.kind,
            "label": self.label,
            "passed": self.passed,
            "score": round(self.score, 4),
        }
        if self.message:
            data["message"] = self.message
        if self.reasoning is not None:
            data["reasoning"] = self.reasoning
        return data


@dataclass
class CaseResult:
    """One case on one side: how its run ended, its checks, what its model calls spent."""

    eval: str
    case: str
    where: str  # file:line:col of the case
    status: str  # finished | failed | waiting | error (the run could not start)
    outputs: JsonDict | None = None
    error: str | None = None
    checks: list[Check] = field(default_factory=list)
    spend: Spend = field(default_factory=Spend)  # the flow's model calls
    judge_spend: Spend = field(default_factory=Spend)  # the judges'
    latency_ms: float = 0.0
    cached_calls: int = 0  # model calls (the judges' too) answered by the response cache
    saved_usd: float = 0.0  # what those calls would have cost

    @property
    def passed(self) -> bool:
        return self.status == "finished" and all(check.passed for check in self.checks)

    @property
    def score(self) -> float:
        if self.status != "finished":
            return 0.0
        if not self.checks:
            return 1.0
        return sum(check.score for check in self.checks) / len(self.checks)

    @property
    def failures(self) -> list[str]:
        """Why it failed, one line each ([] when it passed)."""
        found = [] if self.status == "finished" else [self.error or f"the run is {self.status}"]
        return found + [
            f"{check.label}: {check.message}" for check in self.checks if not check.passed
        ]

    @property
    def reasons(self) -> list[tuple[str, str]]:
        """(label, reasoning) of its judges."""
        return [
            (check.label, check.reasoning) for check in self.checks if check.reasoning is not None
        ]

    def as_dict(self) -> JsonDict:
        return {
            "case": self.case,
            "where": self.where,
            "passed": self.passed,
            "score": round(self.score, 4),
            "status": self.status,
            "error": self.error,
            "outputs": self.outputs,
            "checks": [check.as_dict() for check in self.checks],
            "cost_usd": self.spend.cost_usd,
            "cost": self.spend.cost_text(),
            "usage": self.spend.as_dict(),
            "judge_usage": self.judge_spend.as_dict(),
            "latency_ms": round(self.latency_ms, 1),
            "cached_calls": self.cached_calls,
        }


@dataclass
class EvalResult:
    """One eval on one side: its cases, totals, and which thresholds it missed."""

    name: str
    target: str  # `flow hello`, `block greet`
    file: str
    side: str  # head | base
    label: str  # `working tree`, `HEAD~1 (1a2b3c4)`
    revision: str | None  # the commit, when known
    digest: str | None  # the pinned definition's digest: the flow version
    version: int | None  # its `version:`
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    cases: list[CaseResult] = field(default_factory=list)
    problem: str | None = None  # why nothing ran (the flow does not validate on this side, ...)

    @property
    def passed_count(self) -> int:
        return sum(1 for case in self.cases if case.passed)

    @property
    def pass_rate(self) -> float:
        return self.passed_count / len(self.cases) if self.cases else 0.0

    @property
    def mean_score(self) -> float:
        return sum(case.score for case in self.cases) / len(self.cases) if self.cases else 0.0

    @property
    def spend(self) -> Spend:
        """The flow's model calls over every case (the judges' are `judge_spend`)."""
        total = Spend()
        for case in self.cases:
            total.merge(case.spend)
        return total

    @property
    def judge_spend(self) -> Spend:
        total = Spend()
        for case in self.cases:
            total.merge(case.judge_spend)
        return total

    @property
    def mean_latency_ms(self) -> float:
        return sum(case.latency_ms for case in self.cases) / len(self.cases) if self.cases else 0.0

    @property
    def misses(self) -> list[str]:
        """The thresholds it missed, each in words ([] when it passed)."""
        if self.problem is not None:
            return [self.problem]
        found = []
        wanted = self.thresholds
        if wanted.pass_rate is not None and self.pass_rate < wanted.pass_rate:
            found.append(
                f"pass rate {percent(self.pass_rate)} is below the threshold {percent(wanted.pass_rate)} "
                f"({self.passed_count} of {len(self.cases)} cases passed)"
            )
        if wanted.mean_score is not None and self.mean_score < wanted.mean_score:
            found.append(
                f"mean score {self.mean_score:.2f} is below the threshold {wanted.mean_score:.2f}"
            )
        return found

    @property
    def ok(self) -> bool:
        return not self.misses

    def case(self, name: str) -> CaseResult | None:
        return next((case for case in self.cases if case.case == name), None)

    def summary(self) -> JsonDict:
        spend = self.spend
        return {
            "eval": self.name,
            "target": self.target,
            "side": self.side,
            "label": self.label,
            "revision": self.revision,
            "digest": self.digest,
            "version": self.version,
            "cases": len(self.cases),
            "passed": self.passed_count,
            "pass_rate": round(self.pass_rate, 4),
            "mean_score": round(self.mean_score, 4),
            "cost_usd": round(spend.cost_usd, 8),
            "cost": spend.cost_text(),
            "unpriced_calls": spend.unpriced_calls,
            "tokens": spend.tokens,
            "model_calls": spend.model_calls,
            "judge_cost_usd": round(self.judge_spend.cost_usd, 8),
            "mean_latency_ms": round(self.mean_latency_ms, 1),
            "ok": self.ok,
            "misses": self.misses,
            "thresholds": self.thresholds.model_dump(exclude_none=True),
        }

    def as_dict(self) -> JsonDict:
        return {
            **self.summary(),
            "file": self.file,
            "problem": self.problem,
            "results": [case.as_dict() for case in self.cases],
        }


def percent(share: float) -> str:
    return f"{share * 100:.0f}%" if share * 100 == int(share * 100) else f"{share * 100:.1f}%"


def signed_money(value: float) -> str:
    """A cost difference: `+$0.0012`, `-$0.0100`, `$0`."""
    if value == 0:
        return "$0"
    return ("+" if value > 0 else "-") + money(abs(value))
