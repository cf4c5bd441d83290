"""Why an execution was stopped from outside, told by whoever stopped it.

A server that cancels a run's task (a client's cancel, a newer turn of the thread under
`multitask_strategy: interrupt`, docs/langgraph-api.md) gives the reason first (`give`); the execution,
stopped, takes it (`take`) as the interrupted run's error. Not the task's cancel message: LangGraph runs
a step in tasks of its own, and the CancelledError that reaches the execution is often a new one,
without it.
"""

from __future__ import annotations

_reasons: dict[str, str] = {}  # run id -> why it is being stopped (a handful at once)


def give(run_id: str, reason: str) -> None:
    """Say why run `run_id`, about to be cancelled, is stopped."""
    _reasons[run_id] = reason


def take(run_id: str) -> str | None:
    """Why run `run_id` was stopped, if its canceller said (forgotten once taken)."""
    return _reasons.pop(run_id, None)
