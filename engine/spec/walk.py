"""The one walk over a flow's step tree: every step list (the flow's `steps`, loop, foreach and
map bodies) and every step in it, with its path in the document.

The validator's index, its delegation graph, the flow's own `walk()`, the closure of a flow and
the compiler's checks all walk the tree through here, so a new kind of body is added once. A
step with several bodies (refused by the validator, BY301) has each of them walked, so that the
checks still see every step written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.spec.flow import StepSpec

Path = tuple[str | int, ...]
BODY_KEYS = ("loop", "foreach", "map")


@dataclass(frozen=True, eq=False)
class StepList:
    """One list of steps: the flow's (`kind` "flow", no owner) or the body of step `owner`."""

    kind: str  # flow | loop | foreach | map
    steps: list[StepSpec]
    path: Path  # of the list itself: ("steps",) or (..., position, "loop", "steps")
    owner: StepSpec | None = None
    parent: StepList | None = None
    item: str | None = None  # the `as` name a foreach or map body sees

    @property
    def items(self) -> tuple[str, ...]:
        """The `as` names visible in this list, innermost last."""
        outer = self.parent.items if self.parent is not None else ()
        return (*outer, self.item) if self.item else outer


@dataclass(frozen=True, eq=False)
class Walked:
    """One step of the tree: where it is written and, when it has one, the body it owns."""

    step: StepSpec
    path: Path
    position: int  # in its list
    list: StepList
    bodies: tuple[StepList, ...] = ()  # normally at most one (several only in a step BY301 refuses)


def bodies(step: StepSpec, path: Path, parent: StepList | None = None) -> tuple[StepList, ...]:
    """The step lists nested directly in `step` (written at `path`)."""
    found: list[StepList] = []
    for key in BODY_KEYS:
        body = getattr(step, key)
        steps = getattr(body, "steps", None) if body is not None else None
        if steps:
            found.append(
                StepList(
                    key, steps, (*path, key, "steps"), step, parent, getattr(body, "as_", None)
                )
            )
    return tuple(found)


def walk_steps(steps: list[StepSpec], prefix: Path = ("steps",)) -> Iterator[Walked]:
    """Every step, depth first in document order: a step, then the steps of its body."""
    yield from _walk(StepList("flow", steps, prefix))


def _walk(steps: StepList) -> Iterator[Walked]:
    for position, step in enumerate(steps.steps):
        path = (*steps.path, position)
        nested = bodies(step, path, steps)
        yield Walked(step, path, position, steps, nested)
        for body in nested:
            yield from _walk(body)


def step_lists(steps: list[StepSpec], prefix: Path = ("steps",)) -> Iterator[StepList]:
    """Every list of steps: the flow's first, then each body in document order."""
    root = StepList("flow", steps, prefix)
    yield root
    for walked in _walk(root):
        yield from walked.bodies


def delegated_ids(steps: list[StepSpec], is_agent: Callable[[StepSpec], bool]) -> set[str]:
    """Agent steps of one list that another agent step of the list delegates to: they leave the
    list's order and run only when that agent calls them (docs/flows.md). `is_agent` says whether a
    step runs an agent block (the caller knows the blocks)."""
    if not any(step.delegates for step in steps):
        return set()
    agents = {step.id for step in steps if step.uses is not None and is_agent(step)}
    return {
        name
        for step in steps
        if step.id in agents
        for name in step.delegates
        if name in agents and name != step.id
    }


def accumulated(steps: list[StepSpec]) -> dict[str, str]:
    """Every context key a step accumulates (`reduce:`, at any depth) -> append | merge. They start
    out empty ([] or {}) when a run starts, so a template may read them before the first write."""
    found: dict[str, str] = {}
    for walked in walk_steps(steps):
        for name in walked.step.outputs:
            mode = walked.step.output_reduce(name)
            if mode is not None:
                found.setdefault(walked.step.output_key(name), mode)
    return found
