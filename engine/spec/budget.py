"""Budgets: what one run (and one turn of a conversation thread) may spend on model calls
(docs/observability.md, "Budgets"). A flow's `budget:` and blockyard.yaml's yard default have this
shape; a flow's keys win over the yard's, key by key (`effective`)."""

from __future__ import annotations

from pydantic import Field, ValidationError

from engine.spec.common import Duration, Spec, parse_duration


class BudgetLimits(Spec):
    """Limits on model calls; an unset key is no limit."""

    tokens: int | None = Field(
        None, ge=1, description="Input plus output tokens of all model calls."
    )
    cost_usd: float | None = Field(
        None,
        gt=0,
        description="Cost of all model calls, in US dollars (calls with "
        "an unknown price count as unknown: see docs).",
    )
    model_calls: int | None = Field(None, ge=1, description="Number of model calls.")
    wall_time: Duration | None = Field(
        None,
        description="Time the run (or turn) may take running, e.g. 10m: its "
        "executions' time, not time spent waiting at a gate.",
    )

    @property
    def wall_seconds(self) -> float | None:
        return parse_duration(self.wall_time) if self.wall_time is not None else None

    def is_empty(self) -> bool:
        return all(getattr(self, key) is None for key in LIMIT_KEYS)


LIMIT_KEYS = ("tokens", "cost_usd", "model_calls", "wall_time")


class BudgetSpec(BudgetLimits):
    """Limits per run, and per turn of a conversation thread (`per_turn`)."""

    per_turn: BudgetLimits | None = Field(
        None, description="Limits on one turn of a conversation thread."
    )


def _merged(flow: BudgetLimits | None, yard: BudgetLimits | None) -> dict[str, object]:
    values: dict[str, object] = {}
    for key in LIMIT_KEYS:
        mine = getattr(flow, key) if flow is not None else None
        values[key] = (
            mine if mine is not None else (getattr(yard, key) if yard is not None else None)
        )
    return values


def effective(flow: BudgetSpec | None, yard: BudgetSpec | None) -> BudgetSpec | None:
    """The budget a flow's runs are held to: the flow's keys, else the yard default's."""
    if flow is None and yard is None:
        return None
    turn = BudgetLimits(**_merged(flow.per_turn if flow else None, yard.per_turn if yard else None))  # type: ignore[arg-type]
    budget = BudgetSpec(**_merged(flow, yard), per_turn=None if turn.is_empty() else turn)  # type: ignore[arg-type]
    return None if budget.is_empty() and budget.per_turn is None else budget


def raised(stored: dict[str, object] | None, changes: dict[str, object]) -> BudgetSpec:
    """A run's stored budget with `changes` applied (`tokens`, `per_turn.tokens`, ...: the keys of
    `blockyard resume --budget KEY=VALUE`); ValueError naming what is wrong."""
    values: dict[str, object] = dict(stored or {})
    for key, value in changes.items():
        head, _, tail = key.partition(".")
        if head == "per_turn" and not tail and isinstance(value, dict):
            # {"per_turn": {...}}: key by key
            values["per_turn"] = {**dict(values.get("per_turn") or {}), **value}  # type: ignore[call-overload]
        elif head == "per_turn" and tail:
            turn = dict(values.get("per_turn") or {})  # type: ignore[call-overload]
            turn[tail] = value
            values["per_turn"] = turn
        else:
            values[key] = value
    try:
        return BudgetSpec.model_validate(values)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ValueError(f"budget {where}: {problem['msg']}") from None
