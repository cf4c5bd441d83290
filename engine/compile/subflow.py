"""`flow:` steps: run another flow as one step.

The subflow is compiled into a graph of its own (its step ids prefixed with the calling step's
in events and errors: "research.search") and invoked from this step's node with an explicit
mapping both ways: its inputs come from `with:` (then, like block inputs, from the context key
or flow input of the same name, then its defaults), and its `outputs` keys come back as the
step's outputs (renamed by `outputs:`). Nothing else crosses, so append-only keys
(`results`, `messages`) are never duplicated. The subflow's events reach the run's stream
because the runtime streams with `subgraphs=True`.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from engine.compile.builder import Built, GraphBuilder, Region
from engine.compile.reduce import Landing
from engine.compile.state import State, record
from engine.core.errors import BlockyardError
from engine.core.values import JsonDict
from engine.nodes.context import RunContext
from engine.nodes.errors import Problem, StepFailed, internal
from engine.nodes.events import STEP_STARTED, elapsed_ms, emit, failed, finished
from engine.nodes.scope import item_index, make_scope
from engine.spec.flow import FlowStep
from engine.templates.render import TemplateError, render


def build(builder: GraphBuilder, region: Region, step: FlowStep) -> Built:
    name = step.flow
    where = builder.where(step.id)
    bundle = builder.bundle.flows.get(name)
    if bundle is None:
        raise internal(f"{where}: subflow '{name}', which is not in the flow's bundle", "BY214")
    label = builder.label(step.id)
    sub = builder.compiler.subflow(bundle, f"{label}.", builder.inline is not None)
    declared = bundle.flow.inputs
    frames = region.frames
    item_names = {frame.name for frame in frames}
    landing = Landing(step, frames)

    def given(scope: dict[str, Any]) -> JsonDict:
        values: JsonDict = {}
        for key in declared:
            if key in step.with_:
                try:
                    values[key] = render(step.with_[key], scope)
                except TemplateError as exc:
                    raise _Bad(f"input '{key}': {exc}") from None
            elif key in item_names:
                values[key] = scope[key]
            elif key in scope["context"]:
                values[key] = scope["context"][key]
            elif key in scope["inputs"]:
                values[key] = scope["inputs"][key]
        return values

    async def node(state: State, runtime: Runtime[RunContext]) -> dict[str, Any]:
        # a subgraph node is not wrapped by add_node
        runtime = builder.emits.runtime(state, runtime)
        writer = runtime.stream_writer
        index = item_index(state, frames)
        started = time.monotonic()
        emit(writer, STEP_STARTED, label, {"block": None, "kind": "flow", "flow": name}, index)
        try:
            outputs = await sub.run_nested(given(make_scope(state, frames)), runtime.context)
        except GraphBubbleUp:
            raise
        except StepFailed as exc:
            reason = f"subflow '{name}' failed at step '{exc.step}': {exc.reason}"
            raise failed(
                writer, builder.flow, label, reason, started=started, index=index, cause=exc
            ) from exc
        except (_Bad, BlockyardError) as exc:
            raise failed(
                writer, builder.flow, label, str(exc), started=started, index=index
            ) from None
        except Exception as exc:
            raise failed(
                writer,
                builder.flow,
                label,
                f"subflow '{name}': {sub.explain(exc)}",
                started=started,
                index=index,
                cause=exc,
            ) from exc
        try:
            update = landing.update(outputs, state)
        except Problem as exc:
            raise failed(
                writer, builder.flow, label, str(exc), started=started, index=index
            ) from None
        finished(writer, label, outputs, duration_ms=elapsed_ms(started), index=index, flow=name)
        update["results"] = [record(step.id, None, outputs, flow=name)]
        return update

    builder.add_node(step.id, node, subgraph=True)
    return Built([step.id], tail=step.id)


class _Bad(Exception):
    """A `with:` binding that does not render."""
