"""Which step follows which inside one region (the flow's steps, or a loop/foreach/map body).

Pure analysis of the spec, shared by the graph builder and the drawing. Rules (the validator's
too, docs/flows.md):
- a step without `needs` follows the step before it in the list, unless that step chooses its
  successor itself: `goto`, a `router`, or `branches` that cover every value of the decide enum;
- a step with `needs` waits for exactly those steps (two or more: a barrier join);
- a step that continues in order but has no follower, and that no step needs, ends its region
  (the run, or one pass of a body); `end` as a target does the same;
- control stays inside its region: targets name steps of the same list, or `end`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.nodes.errors import internal
from engine.spec import END, BlockSpec, StepSpec
from engine.spec.flow import enum_text

EXIT = END


@dataclass
class Plan:
    """The default flow of one region; routing steps' own targets are read from their specs."""

    steps: list[StepSpec]
    by_id: dict[str, StepSpec]
    entry: str
    # goto / list order: step ids or EXIT
    following: dict[str, list[str]] = field(default_factory=dict)
    dependents: dict[str, list[str]] = field(default_factory=dict)  # steps that need only this one
    # (needs, waiting step)
    barriers: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    # steps that end the region by running out
    implicit_ends: list[str] = field(default_factory=list)

    def successors(self, step_id: str) -> list[str]:
        """Where a step that does not route itself goes when it finishes."""
        return list(dict.fromkeys([*self.following[step_id], *self.dependents[step_id]]))

    def parallel(self) -> bool:
        """Whether two steps of the region can run at once: a step that goes on to two or more
        (a self-routing step goes to its choice and to the steps that need it), or a barrier join."""
        if self.barriers or len(self.implicit_ends) > 1:
            return True
        for step in self.steps:
            # one target at a time
            routes_itself = step.router is not None or step.branches is not None
            ahead = len(self.dependents[step.id]) + (
                1 if routes_itself else len(set(self.following[step.id]))
            )
            if ahead > 1:
                return True
        return False


def plan_region(
    steps: list[StepSpec], blocks: Mapping[str, BlockSpec], where: str, body: str
) -> Plan:
    """The plan of one region (its targets were checked by the validator). `body` names it for messages."""
    by_id = {step.id: step for step in steps}
    entry = next((step.id for step in steps if step.start), steps[0].id)
    plan = Plan(steps, by_id, entry)
    needed_by: dict[str, list[StepSpec]] = {}
    for step in steps:
        for name in step.needs:
            _check_target(name, by_id, where, step.id, "needs", body, allow_end=False)
            needed_by.setdefault(name, []).append(step)
        for what, target in _targets(step):
            _check_target(target, by_id, where, step.id, what, body)
    for position, step in enumerate(steps):
        following: list[str] = []
        if step.goto is not None and step.router is None:
            following.append(step.goto)
        elif _continues_in_order(step, blocks):
            follower = steps[position + 1] if position + 1 < len(steps) else None
            if follower is not None and not follower.needs:
                following.append(follower.id)
            elif not needed_by.get(step.id):
                following.append(EXIT)
                if step.router is None and step.branches is None:
                    plan.implicit_ends.append(step.id)
        plan.following[step.id] = following
        plan.dependents[step.id] = [
            w.id for w in needed_by.get(step.id, []) if len(set(w.needs)) == 1
        ]
    for step in steps:
        if len(set(step.needs)) > 1:
            plan.barriers.append((tuple(dict.fromkeys(step.needs)), step.id))
    return plan


def _continues_in_order(step: StepSpec, blocks: Mapping[str, BlockSpec]) -> bool:
    if step.router is not None or step.goto is not None:
        return False
    if step.branches is not None:
        block = blocks.get(step.uses) if step.uses else None
        if block is None or len(block.outputs) != 1:
            return True
        (spec,) = block.outputs.values()
        return spec.enum is None or any(enum_text(v) not in step.branches for v in spec.enum)
    return True


def _targets(step: StepSpec) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if step.goto is not None:
        found.append(("goto", step.goto))
    if step.router is not None:
        found.extend(("router", route.goto) for route in step.router.routes)
        found.append(("router default", step.router.default))
    if step.branches is not None:
        found.extend((f"branch '{value}'", target) for value, target in step.branches.items())
    if step.max_visits is not None and step.on_max_visits != "fail":
        found.append(("on_max_visits", step.on_max_visits))
    return found


def _check_target(
    target: str,
    by_id: Mapping[str, StepSpec],
    where: str,
    step: str,
    what: str,
    body: str,
    *,
    allow_end: bool = True,
) -> None:
    if target in by_id or (allow_end and target == EXIT):
        return
    raise internal(
        f"{where}, step '{step}': {what} '{target}', which is not a step of {body}", "BY212, BY213"
    )
