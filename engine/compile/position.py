"""Where a step runs, for its events: which pass of an enclosing loop, out of how many items.

Events of map items and foreach iterations carry `data.index` (0-based, set where they are
emitted) and `data.items` (how many items there are); events of steps in a loop body carry
`data.pass` (1-based) and `data.max_iterations` of the innermost loop. The fields are added by
wrapping the stream writer a node gets, so the constructs that emit events need not know.
Schema: docs/runtime.md ("Events").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from engine.core.events import STEP_FAILED, STEP_FINISHED, STEP_STARTED
from engine.core.values import JsonDict
from engine.nodes.scope import FOREACH_ITEMS, Frame

PASSES = "{}.n"  # a loop's completed passes in `loops` (engine/compile/loop.py COUNT)
MAP_COUNT = "{}.n"  # a map's item count, in each item's `loops` (engine/compile/mapping.py COUNT)
STEP_EVENTS = frozenset({STEP_STARTED, STEP_FINISHED, STEP_FAILED})


@dataclass(frozen=True)
class Pass:
    """An enclosing loop."""

    step: str
    max_iterations: int

    def number(self, loops: Mapping[str, Any]) -> int:
        return int(loops.get(PASSES.format(self.step)) or 0) + 1


def item_count(frame: Frame, loops: Mapping[str, Any]) -> int | None:
    """How many items the map or foreach of `frame` has, when known."""
    if frame.kind == "foreach":
        items = loops.get(FOREACH_ITEMS.format(frame.step))
        return len(items) if isinstance(items, list | tuple) else None
    count = loops.get(MAP_COUNT.format(frame.step))
    return int(count) if isinstance(count, int) else None


@dataclass(frozen=True)
class Where:
    """The enclosing items and loops of one region's steps, and those steps' labels."""

    frames: tuple[Frame, ...]
    passes: tuple[Pass, ...]
    labels: frozenset[str]

    def fields(self, state: Mapping[str, Any]) -> JsonDict:
        loops = state.get("loops") or {}
        found: JsonDict = {}
        if self.frames:
            count = item_count(self.frames[-1], loops)
            if count is not None:
                found["items"] = count
        if self.passes:
            innermost = self.passes[-1]
            found["pass"] = innermost.number(loops)
            found["max_iterations"] = innermost.max_iterations
        return found

    def runtime(self, state: Mapping[str, Any], runtime: Runtime[Any]) -> Runtime[Any]:
        """`runtime` with a writer that adds the fields to the step events of this region's steps."""
        found = self.fields(state)
        return stamped(runtime, self.labels, found) if found else runtime


def stamped(
    runtime: Runtime[Any], labels: frozenset[str], found: Mapping[str, Any]
) -> Runtime[Any]:
    """`runtime` whose writer adds `found` to step events of the steps labelled `labels` (a follower
    of another region run inline keeps its own events as they are)."""
    writer: Callable[[Any], None] = runtime.stream_writer

    def write(chunk: Any) -> None:
        if (
            isinstance(chunk, dict)
            and chunk.get("type") in STEP_EVENTS
            and chunk.get("step") in labels
        ):
            data = chunk.get("data") or {}
            chunk = {**chunk, "data": {**data, **{k: v for k, v in found.items() if k not in data}}}
        writer(chunk)

    return runtime.override(stream_writer=write)
