"""`foreach:` steps: a sequential iterator over a list; each pass sees what the previous wrote.

Nodes: `<id>` evaluates `items` once and signals NEXT (go into the body with item 0) or COMPLETE
(an empty list); `<id>.next` runs after each pass, keeps that pass's result and signals NEXT or
COMPLETE. `loops` holds the list, the position and each pass's result until the step completes;
then `collect` (if set) receives the list of results in item order — each one the outputs of the
body step that finished last in that pass — and the bookkeeping is removed.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command

from engine.compile.builder import Built, GraphBuilder, Region
from engine.compile.state import State, record
from engine.core.values import JsonDict
from engine.nodes.context import RunContext
from engine.nodes.errors import Problem
from engine.nodes.events import STEP_STARTED, elapsed_ms, emit, failed, finished, since
from engine.nodes.scope import FOREACH_INDEX, FOREACH_ITEMS, Frame, item_index, make_scope, plain
from engine.spec.flow import ForeachStep
from engine.templates.render import TemplateError, evaluate

RESULT = "{}.r{}"
SINCE = "{}.t"
MAX_ITEMS = (
    1000  # what the derived step limit assumes (engine/compile/limits.py); max_steps lifts it
)


def build(builder: GraphBuilder, region: Region, step: ForeachStep) -> Built:
    spec = step.foreach
    frames = region.frames
    inner = (*frames, Frame("foreach", step.id, spec.as_))
    done_node = f"{step.id}.next"
    body: list[str] = []  # the body's entry nodes, known once it is built
    body_ids = {child.id for child in spec.steps}
    label = builder.label(step.id)
    items_key, position_key = FOREACH_ITEMS.format(step.id), FOREACH_INDEX.format(step.id)
    since_key = SINCE.format(step.id)
    limited = builder.bundle.flow.max_steps is None
    built = Built([step.id])

    def complete(
        state: State,
        runtime: Runtime[RunContext],
        results: list[Any],
        duration_ms: int,
        clear: dict[str, None],
    ) -> Command[Any]:
        outputs = {spec.collect: results} if spec.collect else {}
        finished(
            runtime.stream_writer,
            label,
            outputs,
            duration_ms=duration_ms,
            index=item_index(state, frames),
            items=len(results),
        )
        update: JsonDict = {"results": [record(step.id, None, outputs)]}
        if clear:
            update["loops"] = clear
        if spec.collect:
            update["context"] = {spec.collect: results}
        return Command(update=update, goto=list(built.after))

    async def start(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        writer = runtime.stream_writer
        index = item_index(state, frames)
        started = time.monotonic()
        emit(writer, STEP_STARTED, label, {"block": None, "kind": "foreach"}, index)
        try:
            items = step_items(spec.items, make_scope(state, frames))
        except Problem as exc:
            raise failed(
                writer, builder.flow, label, str(exc), started=started, index=index
            ) from None
        if limited and len(items) > MAX_ITEMS:
            problem = _too_many(len(items))
            raise failed(writer, builder.flow, label, problem, started=started, index=index)
        if not items:
            return complete(state, runtime, [], elapsed_ms(started), {})
        update = {items_key: list(items), position_key: 0, since_key: time.time()}
        return Command(update={"loops": update}, goto=body)

    async def next_item(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        loops = state.get("loops") or {}
        position = int(loops[position_key])
        result = last_outputs(state.get("results") or [], body_ids)
        if position + 1 < len(loops[items_key]):
            update = {position_key: position + 1, RESULT.format(step.id, position): result}
            return Command(update={"loops": update}, goto=body)
        results = [loops[RESULT.format(step.id, i)] for i in range(position)] + [result]
        clear = {RESULT.format(step.id, i): None for i in range(position)}
        clear.update({items_key: None, position_key: None, since_key: None})
        return complete(state, runtime, results, since(loops.get(since_key)), clear)

    builder.follower(step.id, start)
    # before the body: its barrier joins check their targets exist
    builder.follower(done_node, next_item)
    body.extend(
        builder.build_region(spec.steps, inner, done_node, f"the foreach body of step '{step.id}'")
    )
    return built


def _too_many(count: int) -> str:
    return (
        f"{count} items is more than the {MAX_ITEMS} the flow's derived step limit allows for; set "
        "`max_steps` on the flow"
    )


def step_items(expression: str, scope: dict[str, Any]) -> list[Any]:
    """The items a foreach or a map goes over: the list `expression` gives, as JSON data in the value
    domain (they are kept in the checkpointed state); a Problem saying why not."""
    try:
        items = evaluate(expression, scope)
    except TemplateError as exc:
        raise Problem(f"items: {exc}") from None
    if not isinstance(items, list | tuple):
        raise Problem(f"items must be a list, got {type(items).__name__}")
    checked: list[Any] = plain(items, "items")
    return checked


def last_outputs(results: list[JsonDict], body_ids: set[str]) -> JsonDict:
    """Outputs of the body step that finished last (records are appended in order)."""
    for entry in reversed(results):
        if entry["step"] in body_ids:
            return dict(entry["outputs"])
    return {}
