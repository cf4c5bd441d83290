"""`map:` steps: a parallel fan-out over a list, joined in item order.

Nodes: `<id>` evaluates `items` and sends one `Send("<id>.item", ...)` per item — or, for an
empty list, goes straight to the join (an empty Send list would end the graph); `<id>.item`
runs the block (`uses:`) or the body (`steps:`, a graph of its own, invoked per item) and
keeps its result in `loops["<id>.r<i>"]`; `<id>.join` puts the results in item order into
`collect` and removes the bookkeeping.

Items see the context as it was when the map started; what an item's body writes to the
context stays in that item. `max_concurrency` bounds the items running at once with a
semaphore shared by the items of one map execution (LangGraph's `max_concurrency` config is
per run, not per map); a block's timeout starts once its item holds a slot.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command, RetryPolicy, Send

from engine.compile.blockstep import BlockStep
from engine.compile.builder import Built, GraphBuilder, Region
from engine.compile.foreach import last_outputs, step_items
from engine.compile.limits import region_bound
from engine.compile.position import stamped
from engine.compile.reduce import LOG, log_key, replay
from engine.compile.state import State, record
from engine.compile.wired import executor_for
from engine.core.values import JsonDict
from engine.nodes.context import RunContext
from engine.nodes.errors import Problem, StepFailed, internal
from engine.nodes.events import STEP_STARTED, emit, failed, finished, since
from engine.nodes.scope import MAP_INDEX, MAP_ITEM, Frame, item_index, make_scope
from engine.spec import MapSpec, StepSpec
from engine.spec.flow import MapStep

COUNT = "{}.n"
RESULT = "{}.r{}"
SINCE = "{}.t"
DELTA = "{}.d{}"  # what item i accumulated (`reduce:` outputs of its body), replayed at the join

# One semaphore per map execution, found by the token its items carry; it lives as long as one
# of its items holds it.
_SLOTS: weakref.WeakValueDictionary[str, asyncio.Semaphore] = weakref.WeakValueDictionary()


def build(builder: GraphBuilder, region: Region, step: MapStep) -> Built:
    spec = step.map
    frames = region.frames
    inner = (*frames, Frame("map", step.id, spec.as_))
    label = builder.label(step.id)
    item_node, join_node = f"{step.id}.item", f"{step.id}.join"
    count_key, since_key = COUNT.format(step.id), SINCE.format(step.id)
    index_key = MAP_INDEX.format(step.id)
    run_item, retry, pauses = _item_function(builder, step, spec, inner)
    outer_log = log_key(frames)
    needs_results = _mentions_steps(spec)

    async def fan_out(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        writer = runtime.stream_writer
        index = item_index(state, frames)
        started = time.monotonic()
        emit(
            writer,
            STEP_STARTED,
            label,
            {"block": spec.uses, "kind": "map", "max_concurrency": spec.max_concurrency},
            index,
        )
        try:
            items = step_items(spec.items, make_scope(state, frames))
        except Problem as exc:
            raise failed(
                writer, builder.flow, label, str(exc), started=started, index=index
            ) from None
        update = {"loops": {count_key: len(items), since_key: time.time()}}
        if not items:
            return Command(update=update, goto=join_node)
        return Command(update=update, goto=_sends(state, step.id, item_node, items, needs_results))

    async def item(payload: dict[str, Any], runtime: Runtime[RunContext]) -> dict[str, Any]:
        position = int(payload["loops"][index_key])
        count = payload["loops"].get(count_key)
        if count is not None:
            # the item's events say "item 3 of 10" (a body's own steps: their region)
            runtime = stamped(runtime, frozenset({label}), {"items": count})
        if spec.max_concurrency is None:
            outputs, log = await run_item(payload, runtime, position)
        else:
            async with _Slot(payload["slot"], spec.max_concurrency):
                outputs, log = await run_item(payload, runtime, position)
        loops: JsonDict = {RESULT.format(step.id, position): outputs}
        if log:
            loops[DELTA.format(step.id, position)] = log
        return {"loops": loops}

    async def join(state: State, runtime: Runtime[RunContext]) -> dict[str, Any]:
        loops = state.get("loops") or {}
        count = int(loops.get(count_key, 0))
        results = [loops[RESULT.format(step.id, i)] for i in range(count)]
        outputs = {spec.collect: results} if spec.collect else {}
        finished(
            runtime.stream_writer,
            label,
            outputs,
            duration_ms=since(loops.get(since_key)),
            index=item_index(state, frames),
            block=spec.uses,
            items=count,
        )
        return _joined(state, step.id, spec, count, results, outputs, outer_log)

    builder.follower(step.id, fan_out)
    builder.add_items(
        item_node, item, join_node, retry=retry, subgraph=spec.steps is not None, inline=not pauses
    )
    builder.add_node(join_node, join, inline=True)
    return Built([step.id], tail=join_node)


def _sends(
    state: State, step_id: str, item_node: str, items: list[Any], needs_results: bool
) -> list[Send]:
    """One Send of the item node per item: the state it reads (the results only when its templates name
    steps), the item and its position, and a token its concurrency slot is shared by."""
    token = uuid.uuid4().hex
    base = {
        "inputs": state.get("inputs") or {},
        "context": state.get("context") or {},
        "results": (state.get("results") or []) if needs_results else [],
    }
    loops = state.get("loops") or {}
    count_key = COUNT.format(step_id)
    return [
        Send(
            item_node,
            {
                **base,
                "loops": {
                    **loops,
                    MAP_ITEM.format(step_id): item,
                    MAP_INDEX.format(step_id): position,
                    count_key: len(items),
                },
                "slot": token,
            },
        )
        for position, item in enumerate(items)
    ]


def _joined(
    state: State,
    step_id: str,
    spec: MapSpec,
    count: int,
    results: list[Any],
    outputs: JsonDict,
    outer_log: str | None,
) -> dict[str, Any]:
    """The join's update: the items' slots cleared, the map's result recorded, and what the items
    accumulated, in item order, into the shared context and into the log of the map around this one."""
    loops = state.get("loops") or {}
    clear: JsonDict = {RESULT.format(step_id, i): None for i in range(count)}
    clear.update({DELTA.format(step_id, i): None for i in range(count)})
    clear.update({COUNT.format(step_id): None, SINCE.format(step_id): None})
    update: dict[str, Any] = {"loops": clear, "results": [record(step_id, spec.uses, outputs)]}
    entries = [entry for i in range(count) for entry in loops.get(DELTA.format(step_id, i)) or ()]
    context = replay(state.get("context") or {}, entries) if entries else {}
    if entries and outer_log is not None:
        clear[outer_log] = [*(loops.get(outer_log) or []), *entries]
    if spec.collect:
        context[spec.collect] = results
    if context:
        update["context"] = context
    return update


# (payload, runtime, position) -> (the item's outputs, what it accumulated: [[key, mode, value], ...])
RunItem = Callable[[dict[str, Any], Runtime[RunContext], int], Awaitable[tuple[Any, list[Any]]]]


def _item_function(
    builder: GraphBuilder, step: StepSpec, spec: MapSpec, frames: tuple[Frame, ...]
) -> tuple[RunItem, RetryPolicy | None, bool]:
    """How one item runs (payload, runtime, position -> outputs), the item node's retry policy, and
    whether an item of a `uses:` map may wait for a person (an agent's `approve_tools`)."""
    if (spec.uses is None) == (spec.steps is None):
        raise internal(
            f"{builder.where(step.id)}: a map with {'both' if spec.uses else 'neither'} of uses and steps",
            "BY319",
        )
    if spec.uses is not None:
        block = builder.block(spec.uses, step.id)
        label = builder.label(step.id)
        wired = executor_for(builder, None, None, block, spec.uses, label)
        block_step = BlockStep(
            builder.flow,
            step.id,
            label,
            block,
            spec.with_,
            frames,
            {},
            executor=wired,
            files=builder.bundle.prompts,
        )

        async def run_block(
            payload: dict[str, Any], runtime: Runtime[RunContext], position: int
        ) -> tuple[Any, list[Any]]:
            return await block_step.run(make_scope(payload, frames), runtime, position), []

        return run_block, block_step.policies.retry, block_step.pauses

    assert spec.steps is not None

    sub = builder.sub_builder()
    sub.build_root(spec.steps, frames, f"the map body of step '{step.id}'")
    body = sub.graph.compile(name=f"{builder.flow}.{step.id}")
    body_limit = region_bound(spec.steps) + 2
    if builder.bundle.flow.max_steps is not None:
        # the flow lifted the foreach bound: bodies follow
        body_limit = max(body_limit, builder.bundle.flow.max_steps)
    body_ids = {child.id for child in spec.steps}
    label = builder.label(step.id)

    log = LOG.format(step.id)

    async def run_body(
        payload: dict[str, Any], runtime: Runtime[RunContext], position: int
    ) -> tuple[Any, list[Any]]:
        state = {key: payload[key] for key in ("inputs", "context", "results", "loops")}
        state["messages"] = []
        started = time.monotonic()
        try:
            final = await body.ainvoke(state, {"recursion_limit": body_limit})
        except (StepFailed, GraphBubbleUp):
            raise  # a body step failed (it named itself and the item already), or LangGraph control flow
        except Exception as exc:
            raise failed(
                runtime.stream_writer,
                builder.flow,
                label,
                f"{type(exc).__name__}: {exc}",
                started=started,
                index=position,
                cause=exc,
            ) from exc
        return last_outputs(final.get("results") or [], body_ids), list(
            (final.get("loops") or {}).get(log) or []
        )

    return run_body, None, False


class _Slot:
    """Hold one of the `limit` slots of a map execution for the duration of an item."""

    def __init__(self, token: str, limit: int) -> None:
        semaphore = _SLOTS.get(token)
        if semaphore is None:
            semaphore = asyncio.Semaphore(limit)
            _SLOTS[token] = semaphore
        self.semaphore = semaphore

    async def __aenter__(self) -> None:
        await self.semaphore.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.semaphore.release()


def _mentions_steps(spec: MapSpec) -> bool:
    """Whether a template of the map may read `steps.<id>.outputs` (then items get the results)."""
    text = json.dumps(spec.model_dump(mode="json", by_alias=True))
    return "steps." in text or "steps[" in text
