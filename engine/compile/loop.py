"""`loop:` steps: the body runs at least once; after each pass `until` is checked.

Nodes: `<id>` (start: an event, then the body) and `<id>.check` (after each pass: go round
again, or leave; a plain block step ending the body runs it inline, see `GraphBuilder.follower`).
The pass count (and the start time) live in `loops["<id>.n"]` and are removed when the loop
ends, so a loop entered again (inside another loop) starts from zero. When `max_iterations` passes
ran without `until` becoming true the loop is exhausted: a `warning` event and the run goes
on (`on_exhausted: continue`), or the step fails (`on_exhausted: fail`). Without `until`, the
loop simply runs `max_iterations` times.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command

from engine.compile.builder import Built, GraphBuilder, Region
from engine.compile.position import Pass
from engine.compile.state import State, record
from engine.nodes.context import RunContext
from engine.nodes.events import STEP_STARTED, emit, failed, finished, since, warning
from engine.nodes.scope import item_index, make_scope
from engine.spec.flow import LoopStep
from engine.templates.render import TemplateError, evaluate

COUNT = "{}.n"
SINCE = "{}.t"


def build(builder: GraphBuilder, region: Region, step: LoopStep) -> Built:
    spec = step.loop
    check = f"{step.id}.check"
    body: list[str] = []  # the body's entry nodes, known once it is built
    frames = region.frames
    label = builder.label(step.id)
    count, since_key = COUNT.format(step.id), SINCE.format(step.id)
    built = Built([step.id], tail=None)

    async def start(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        emit(
            runtime.stream_writer,
            STEP_STARTED,
            label,
            {"block": None, "kind": "loop", "max_iterations": spec.max_iterations},
            item_index(state, frames),
        )
        return Command(update={"loops": {since_key: time.time()}}, goto=body)

    async def after_pass(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        writer = runtime.stream_writer
        index = item_index(state, frames)
        started = time.monotonic()
        loops = state.get("loops") or {}
        passes = int(loops.get(count, 0)) + 1
        done = False
        if spec.until is not None:
            try:
                done = bool(evaluate(spec.until, make_scope(state, frames)))
            except TemplateError as exc:
                raise failed(
                    writer, builder.flow, label, f"until: {exc}", started=started, index=index
                ) from None
        if not done and passes < spec.max_iterations:
            return Command(update={"loops": {count: passes}}, goto=body)
        status = "ok"
        if not done and spec.until is not None:
            message = (
                f"loop '{label}' ran {passes} iteration{'s' if passes > 1 else ''} (max_iterations) "
                f"and `until: {spec.until}` is still false"
            )
            if spec.on_exhausted == "fail":
                raise failed(writer, builder.flow, label, message, started=started, index=index)
            warning(writer, label, "loop_exhausted", message + "; going on", iterations=passes)
            status = "exhausted"
        outputs = {"iterations": passes}
        finished(
            writer,
            label,
            outputs,
            duration_ms=since(loops.get(since_key)),
            index=index,
            status=status,
        )
        update = {
            "results": [record(step.id, None, outputs, status)],
            "loops": {count: None, since_key: None},
        }
        return Command(update=update, goto=list(built.after))

    builder.follower(step.id, start)
    # before the body: its barrier joins check their targets exist
    builder.follower(check, after_pass)
    body.extend(
        builder.build_region(
            spec.steps,
            region.frames,
            check,
            f"the loop body of step '{step.id}'",
            loop=Pass(step.id, spec.max_iterations),
        )
    )
    return built
