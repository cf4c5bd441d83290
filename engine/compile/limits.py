"""The per-run step limit (LangGraph's `recursion_limit`, counted in supersteps), derived from
the flow's bounds so that a correct run never hits it and a runaway one stops early.

Cost of one pass through a list of steps = the sum of its steps' costs (parallel branches
share supersteps, so the sum is an upper bound), where
- a block, router, decide, approval or subflow step costs 1 (a subflow's own steps count in its
  own graph, which gets its own limit); a `max_visits` guard adds 1, a `require_approval` gate
  1; a self-routing step that ends a barrier join adds 1 for its pass-through node;
- a loop costs 2 + max_iterations × (body + 1);
- a foreach costs 1 + MAX_ITEMS × (body + 1) — its start node refuses longer lists unless the
  flow sets `max_steps`;
- a map costs 3 (fan-out, all items in one superstep, join); a `steps:` body runs as a graph
  of its own with its own limit.
Back-edges: every cycle passes through a step with `max_visits` (validate enforces it), so a
list with such steps runs at most 1 + Σ max_visits times over: its cost is multiplied by that.
The flow's limit is that cost plus 2 (LangGraph counts the input step and needs one more step
than nodes run), or the flow's `max_steps` when set.
"""

from __future__ import annotations

from engine.compile.foreach import MAX_ITEMS
from engine.spec import FlowSpec, StepSpec

SLACK = 2


def recursion_limit(flow: FlowSpec) -> int:
    """The `recursion_limit` to run `flow` with."""
    if flow.max_steps is not None:
        return flow.max_steps
    return region_bound(flow.steps) + SLACK


def region_bound(steps: list[StepSpec]) -> int:
    """Upper bound on the supersteps of one pass through `steps`."""
    one_pass = sum(_step_cost(step) for step in steps) + _joins(steps)
    revisits = sum(step.max_visits for step in steps if step.max_visits is not None)
    return one_pass * (1 + revisits)


def _step_cost(step: StepSpec) -> int:
    cost = 1 if step.max_visits is None else 2
    if step.require_approval is not False:
        cost += 1
    if step.loop is not None:
        return cost + 1 + step.loop.max_iterations * (region_bound(step.loop.steps) + 1)
    if step.foreach is not None:
        return cost + MAX_ITEMS * (region_bound(step.foreach.steps) + 1)
    if step.map is not None:
        return cost + 2
    return cost


def _joins(steps: list[StepSpec]) -> int:
    """Pass-through nodes: at most one per step that another waits for, plus a body's end join."""
    needed = {name for step in steps for name in step.needs}
    return len(needed) + 1
