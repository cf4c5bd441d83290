"""`max_visits` guards: a node in front of a step that counts its entries.

Back-edges (a goto from a router or branch to an earlier step) may only target such a step.
The guard lets the first `max_visits` entries in; the next one goes to `on_max_visits` instead
(a step, or `end`, with a `warning` event) or fails the step (`fail`). The count lives in
`loops["<id>.v"]` for the whole run (across passes of an enclosing loop).
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command

from engine.compile.builder import Built, GraphBuilder, Region
from engine.compile.state import State, record
from engine.nodes.context import RunContext
from engine.nodes.events import failed, warning
from engine.nodes.scope import item_index
from engine.spec import StepSpec

VISITS = "{}.v"


def wrap(builder: GraphBuilder, region: Region, step: StepSpec, inner: Built) -> Built:
    """`inner` behind a visit guard: same exits, the guard as its entry."""
    bound = step.max_visits
    assert bound is not None
    key = VISITS.format(step.id)
    guard = f"{step.id}.visit"
    entries = list(inner.entries)
    target = step.on_max_visits
    label = builder.label(step.id)
    frames = region.frames

    async def node(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        visits = int((state.get("loops") or {}).get(key, 0)) + 1
        if visits <= bound:
            return Command(update={"loops": {key: visits}}, goto=entries)
        writer = runtime.stream_writer
        index = item_index(state, frames)
        message = f"step '{label}' was entered more than its max_visits of {bound} times"
        if target == "fail":
            raise failed(
                writer, builder.flow, label, message, started=time.monotonic(), index=index
            )
        goto = region.resolve(target)
        warning(writer, label, "max_visits", f"{message}; going to '{target}'", goto=target)
        return Command(
            update={"results": [record(step.id, None, {"goto": target}, "skipped")]}, goto=goto
        )

    builder.add_node(guard, node)
    inner.entries = [guard]
    return inner
