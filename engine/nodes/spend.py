"""What a run's model calls spend, and the budget that bounds it (docs/observability.md, "Budgets").

`RunSpend` lives in the run's context: the run's totals (carried over from its earlier
executions), its budget, and — in a conversation thread's turn — what the thread's earlier turns
spent. `StepCalls` is the recorder a block step installs around its executor
(engine/models/calls.py): each model call becomes a `model_call` event of the step and counts
toward the run; a call the budget no longer allows is refused before it is made, and the call
that passes a limit fails the step with `BudgetExceeded`, naming the limit and what was spent.

For a conversation thread, the budget's own limits bound the whole thread (every turn so far,
this one included) and `per_turn` each turn; for any other run, the budget's limits bound the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.core.errors import BlockyardError
from engine.core.events import MODEL_CALL
from engine.core.usage import ModelCall, Spend, money
from engine.core.values import JsonDict
from engine.nodes.events import emit, warning
from engine.spec.budget import BudgetLimits, BudgetSpec

if TYPE_CHECKING:
    # LangGraph is not loaded by what only draws or reviews flows (engine/nodes/context.py)
    from langgraph.types import StreamWriter


class BudgetExceeded(BlockyardError):
    """A run passed (or would pass) a limit of its budget. Not transient: never retried."""

    code = "budget_exceeded"


@dataclass
class RunSpend:
    """A run's spending and its limits (one per execution; the totals carry over between executions)."""

    run_id: str = "RUN_ID"  # named in the error: how to go on
    spent: Spend = field(default_factory=Spend)  # the run's, over all its executions so far
    budget: BudgetSpec | None = None
    thread: Spend | None = None  # a thread turn: what the thread's earlier turns spent
    duration_before: float = 0.0  # seconds the run's earlier executions took
    thread_duration_before: float = 0.0  # seconds the thread's earlier turns took
    began: float = field(default_factory=time.monotonic)
    unpriced_warned: bool = False

    def elapsed(self) -> float:
        return self.duration_before + time.monotonic() - self.began

    def _scopes(self) -> list[tuple[str, BudgetLimits, Spend, float]]:
        """(what the limits are called, the limits, what counts against them, seconds so far)."""
        if self.budget is None:
            return []
        if self.thread is None:
            return [("the run's budget", self.budget, self.spent, self.elapsed())]
        whole = self.thread.copy()
        whole.merge(self.spent)
        scopes: list[tuple[str, BudgetLimits, Spend, float]] = [
            (
                "the thread's budget",
                self.budget,
                whole,
                self.thread_duration_before + self.elapsed(),
            )
        ]
        if self.budget.per_turn is not None:
            scopes.append(
                ("the turn's budget (per_turn)", self.budget.per_turn, self.spent, self.elapsed())
            )
        return scopes

    def before(self, purpose: str) -> None:
        """Refuse a model call the budget no longer allows: its calls, tokens or cost are all spent,
        or its wall time is over."""
        for name, limits, spent, seconds in self._scopes():
            if limits.model_calls is not None and spent.model_calls + 1 > limits.model_calls:
                raise self._exceeded(
                    name,
                    "model_calls",
                    f"{spent.model_calls} model calls made, the limit is {limits.model_calls}",
                    spent,
                )
            if limits.tokens is not None and spent.tokens >= limits.tokens:
                raise self._exceeded(
                    name,
                    "tokens",
                    f"{spent.tokens:,} tokens spent, the limit is {limits.tokens:,}",
                    spent,
                )
            if limits.cost_usd is not None and spent.cost_usd >= limits.cost_usd:
                raise self._exceeded(
                    name,
                    "cost_usd",
                    f"{money(spent.cost_usd)} spent, the limit is {money(limits.cost_usd)}",
                    spent,
                )
            wall = limits.wall_seconds
            if wall is not None and seconds > wall:
                raise self._exceeded(
                    name,
                    "wall_time",
                    f"{seconds:.1f}s taken, the limit is {limits.wall_time}",
                    spent,
                )

    def after(self, data: JsonDict) -> None:
        """Count a model call; BudgetExceeded when it passed a limit of tokens or cost."""
        self.spent.add(data)
        for name, limits, spent, _ in self._scopes():
            if limits.tokens is not None and spent.tokens > limits.tokens:
                raise self._exceeded(
                    name,
                    "tokens",
                    f"{spent.tokens:,} tokens spent, the limit is {limits.tokens:,}",
                    spent,
                )
            if limits.cost_usd is not None and spent.cost_usd > limits.cost_usd:
                raise self._exceeded(
                    name,
                    "cost_usd",
                    f"{money(spent.cost_usd)} spent, the limit is {money(limits.cost_usd)}",
                    spent,
                )

    def _exceeded(self, name: str, key: str, what: str, spent: Spend) -> BudgetExceeded:
        option = f"per_turn.{key}" if "per_turn" in name else key
        return BudgetExceeded(
            f"{name} is exceeded: {key}: {what} (so far {spent.model_calls} model calls, {spent.tokens:,} tokens, "
            f"cost {spent.cost_text()}); raise the limit and resume the run: blockyard resume {self.run_id} "
            f"--budget {option}=N"
        )


class StepCalls:
    """The model-call recorder of one execution of a block step (engine/models/calls.py)."""

    def __init__(
        self, spend: RunSpend | None, writer: StreamWriter, label: str, index: int | None
    ) -> None:
        self.spend = spend
        self.writer = writer
        self.label = label
        self.index = index

    def before(self, purpose: str) -> None:
        if self.spend is not None:
            self.spend.before(purpose)

    def after(self, call: ModelCall) -> None:
        data = call.as_data()
        emit(self.writer, MODEL_CALL, self.label, data, self.index)
        spend = self.spend
        if spend is None:
            return
        if (
            data["cost_usd"] is None
            and not spend.unpriced_warned
            and spend.budget is not None
            and _limits_cost(spend.budget)
        ):
            spend.unpriced_warned = True
            warning(
                self.writer,
                self.label,
                "budget_unpriced",
                f"model '{call.model}' ({call.provider}) has no known price: its calls count toward the "
                "budget's tokens and model_calls but not its cost_usd (state `pricing:` in its profile)",
            )
        spend.after(data)


def _limits_cost(budget: BudgetSpec) -> bool:
    return budget.cost_usd is not None or (
        budget.per_turn is not None and budget.per_turn.cost_usd is not None
    )
