"""Steps run inline, one after another in one LangGraph node (engine/compile/inline.py): the same
events, records, state and outputs as the graph that runs them step by step, in fewer LangGraph
steps — and never inline where two nodes may run at once. With a journal (durable runs), a run
crashed between two inline steps resumes to the same run."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver

from engine.compile import CompiledFlow, RunContext, compile_flow
from engine.compile.inline import YIELD_EVERY
from engine.definitions.load import parse_value
from engine.definitions.pinned import Bundle
from engine.models import ModelResolver, scripted
from engine.nodes.context import Restored
from engine.state.journal import item_next, restored, step_row
from tests.compile.compile_kit import BLOCKS, FakeTools, Run, run_async, yard_bundle

MARK = parse_value(BLOCKS["mark"].replace("\n        ", "\n").strip())
FLAKY = {
    "flaky": """
        block: flaky
        kind: tool
        tool: flaky
        inputs: {}
        outputs:
          ok: {type: boolean}
        retry: {attempts: 2, initial: 1ms, on: [timeout]}
        """,
}


TIMINGS = frozenset({"duration_ms", "latency_ms", "ttft_ms"})


def normalized(value: Any) -> Any:
    """Events and records without their timings (the only thing two runs may differ in: a step's duration, a
    model call's latency and time to first token)."""
    if isinstance(value, dict):
        return {key: normalized(item) for key, item in value.items() if key not in TIMINGS}
    if isinstance(value, list):
        return [normalized(item) for item in value]
    return value


def context_for(compiled: CompiledFlow, run_id: str, tools: FakeTools | None) -> RunContext:
    return RunContext(
        run_id=run_id,
        models=ModelResolver(compiled.bundle.config, env={}, run_id=run_id),
        tools=tools or FakeTools(),
        workspace=Path("."),
        thread_id=uuid.uuid4().hex,
    )


async def run_inline_async(
    compiled: CompiledFlow,
    inputs: dict[str, Any] | None = None,
    *,
    tools: FakeTools | None = None,
    replies: dict[str, list[Any]] | None = None,
    cancel_after: int | None = None,
) -> tuple[Run, int]:
    """Run a graph without a checkpointer; the run and how many LangGraph steps its root graph took.
    `cancel_after`: cancel the run once that many events came."""
    run = Run({}, compiled=compiled)
    supersteps = 0
    with scripted("run-1", replies or {}) as script:
        run.model_calls = script.calls
        context = context_for(compiled, "run-1", tools)

        async def stream() -> None:
            nonlocal supersteps
            async for namespace, mode, data in compiled.graph.astream(
                compiled.initial_state(dict(inputs or {})),
                compiled.config("t"),
                context=context,
                stream_mode=["custom", "values"],
                subgraphs=True,
            ):
                if mode == "custom":
                    # what engine/nodes/events.py writes
                    run.events.append(cast("dict[str, Any]", data))
                    if cancel_after is not None and len(run.events) >= cancel_after:
                        raise asyncio.CancelledError
                elif not namespace:
                    run.state = dict(cast("dict[str, Any]", data))
                    supersteps += 1

        try:
            await stream()
        except asyncio.CancelledError:
            run.error = asyncio.CancelledError()
        except Exception as exc:
            run.error = exc
    return run, supersteps


def both(
    bundle: Bundle, inputs: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[Run, Run, int]:
    """The flow run step by step (on a checkpointer) and inline; and the inline run's LangGraph steps."""
    stepwise = asyncio.run(
        run_async(compile_flow(bundle, checkpointer=InMemorySaver()), inputs, **kwargs)
    )
    inline, supersteps = asyncio.run(
        run_inline_async(compile_flow(bundle, inline=True), inputs, **kwargs)
    )
    return stepwise, inline, supersteps


def assert_same(stepwise: Run, inline: Run) -> None:
    assert normalized(inline.events) == normalized(stepwise.events)
    assert (type(inline.error), str(inline.error)) == (type(stepwise.error), str(stepwise.error))
    if stepwise.error is None:
        # (a failed run's state is not kept without checkpoints: only its events tell)
        for key in ("context", "results", "loops"):
            assert normalized(inline.state.get(key)) == normalized(stepwise.state.get(key)), key
        assert inline.outputs == stepwise.outputs


def generated(steps: list[dict[str, Any]]) -> Bundle:
    flow = {"flow": "gen", "outputs": [], "steps": steps}
    return Bundle.from_source({"flow": flow, "blocks": {"mark": MARK}, "flows": {}, "config": {}})


def mark(name: str) -> dict[str, Any]:
    return {"id": name, "uses": "mark", "with": {"tag": name}}


@st.composite
def sequential_flows(draw: st.DrawFn, depth: int = 0, prefix: str = "s") -> list[dict[str, Any]]:
    """Flows of plain steps, forward gotos, routers, loops, foreach and maps (bodies of the same kinds)."""
    size = draw(st.integers(1, 6))
    names = [f"{prefix}{i}" for i in range(size)]
    steps: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        later = names[i + 2 :]
        kind = draw(
            st.sampled_from(["plain", "plain", "goto", "router", "loop", "foreach", "map", "emit"])
        )
        if kind == "goto" and later:
            steps.append({**mark(name), "goto": draw(st.sampled_from([*later, "end"]))})
        elif kind == "router" and later:
            steps.append(
                {
                    "id": name,
                    "router": {
                        "routes": [
                            {
                                "expr": f"(context.log | default([]) | length) % {draw(st.integers(2, 3))} == 0",
                                "goto": draw(st.sampled_from(later)),
                            }
                        ],
                        "default": draw(st.sampled_from([*later, "end"])),
                    },
                }
            )
        elif kind == "loop" and depth < 2:
            steps.append(
                {
                    "id": name,
                    "loop": {
                        "until": f"(context.log | default([]) | length) >= {draw(st.integers(1, 12))}",
                        "max_iterations": draw(st.integers(1, 4)),
                        "steps": draw(sequential_flows(depth + 1, f"{name}_")),
                    },
                }
            )
        elif kind == "foreach" and depth < 2:
            steps.append(
                {
                    "id": name,
                    "foreach": {
                        "items": "[1, 2]",
                        "as": "item",
                        "steps": draw(sequential_flows(depth + 1, f"{name}_")),
                    },
                }
            )
        elif kind == "map" and depth < 2:
            steps.append(
                {
                    "id": name,
                    "map": {
                        "items": "['a', 'b', 'c']",
                        "as": "x",
                        "uses": "mark",
                        "with": {"tag": "{{ x }}", "log": []},
                        "collect": f"{name}_all",
                    },
                }
            )
        elif kind == "emit":
            steps.append(
                {
                    **mark(name),
                    "emit": [{"event": "marked", "data": {"size": "{{ context.log | length }}"}}],
                }
            )
        else:
            steps.append(mark(name))
    return steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequential_flows())
def test_generated_flows_give_the_same_run_inline_as_step_by_step(
    steps: list[dict[str, Any]],
) -> None:
    stepwise, inline, _ = both(generated(steps), tools=FakeTools())
    assert stepwise.error is None, stepwise.error
    assert_same(stepwise, inline)


class Crash(Exception):
    """The process died right after a step's row was committed (before the next step began)."""


class MemoryJournal:
    """engine/state/journal.py's protocol in memory, `sync`: rows kept per task namespace, read back as
    the real one reads them (`restored`); after `crash_after` rows (a step's or a map item's), the run
    stops as a process killed at that moment would (the row is kept)."""

    def __init__(self, crash_after: int) -> None:
        self.rows: dict[str, list[tuple[int, str, Any]]] = {}
        self.crash_after = crash_after
        self.written = 0
        self.resumed = False

    async def restore(self, ns: str) -> Restored | None:
        done = self.rows.pop(ns, None) if self.resumed else None
        return restored(sorted(done, key=lambda row: row[0])) if done else None

    async def finished(
        self,
        ns: str,
        seq: int,
        update: Mapping[str, Any],
        following: str,
        items: list[Any] | None = None,
    ) -> None:
        self._keep(ns, seq, *step_row(update, following, items))

    def item_finished(self, ns: str, seq: int, position: int, update: Mapping[str, Any]) -> None:
        self._keep(ns, seq, item_next(position), dict(update))

    def _keep(self, ns: str, seq: int, following: str, value: Any) -> None:
        self.rows.setdefault(ns, []).append((seq, following, copy.deepcopy(value)))
        self.written += 1
        if self.written == self.crash_after:
            raise Crash

    async def settle(self) -> None:
        return None

    def stopped(self) -> None:
        return None


async def run_journaled(bundle: Bundle, crash_after: int) -> tuple[Run, int]:
    """The engine's graph for durable runs (inline, on a checkpointer, with a journal), crashed after
    `crash_after` steps ran inline and resumed; the run (events of both executions) and the rows written."""
    compiled = compile_flow(bundle, checkpointer=InMemorySaver(), inline=True)
    run = Run({}, compiled=compiled)
    journal = MemoryJournal(crash_after)
    config = compiled.config(uuid.uuid4().hex)
    with scripted("run-1", {}):
        context = context_for(compiled, "run-1", FakeTools())
        context.journal = journal
        start: Any = compiled.initial_state({})
        for _execution in range(2):
            try:
                async for _ns, _mode, data in compiled.graph.astream(
                    start, config, context=context, stream_mode=["custom"], subgraphs=True
                ):
                    run.events.append(cast("dict[str, Any]", data))
            except Crash:
                journal.resumed, start = (
                    True,
                    None,
                )  # the next execution goes on from the checkpoint
                continue
            break
    run.state = dict((await compiled.graph.aget_state(config)).values)
    return run, journal.written


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequential_flows(), st.integers(1, 10))
def test_a_durable_run_crashed_between_inline_steps_resumes_to_the_same_run(
    steps: list[dict[str, Any]], crash_after: int
) -> None:
    bundle = generated(steps)
    stepwise = asyncio.run(
        run_async(compile_flow(bundle, checkpointer=InMemorySaver()), tools=FakeTools())
    )
    resumed, _written = asyncio.run(run_journaled(bundle, crash_after))
    # the steps before the crash ran once, the others after the resume: together, the run step by step
    assert_same(stepwise, resumed)


def test_a_durable_map_runs_its_items_in_its_node_and_a_crash_runs_only_the_rest() -> None:
    items = 5
    bundle = generated(
        [
            mark("s0"),
            {
                "id": "each",
                "map": {
                    "items": str([f"x{i}" for i in range(items)]),
                    "as": "x",
                    "uses": "mark",
                    "with": {"tag": "{{ x }}", "log": []},
                    "collect": "all",
                },
            },
            mark("s2"),
        ]
    )
    stepwise = asyncio.run(
        run_async(compile_flow(bundle, checkpointer=InMemorySaver()), tools=FakeTools())
    )
    # rows: s0's with the fan-out it runs (what it sends), one per item, the join's; s2 ends the node
    whole, written = asyncio.run(run_journaled(bundle, crash_after=10**6))
    assert written == 1 + items + 1
    assert_same(stepwise, whole)
    for crash_after in range(1, 1 + items + 1):  # after the fan-out's row, after each item's
        resumed, written = asyncio.run(run_journaled(bundle, crash_after))
        assert_same(stepwise, resumed)  # each item finished once, in either execution
        finished = [
            e["data"]["index"]
            for e in resumed.events
            if e["type"] == "step_finished" and e["step"] == "each" and "index" in e["data"]
        ]
        assert sorted(finished) == list(range(items)), (crash_after, finished)
        assert written == 1 + items + 1, crash_after  # no row written twice


def test_a_chain_runs_in_one_langgraph_step_and_a_parallel_flow_step_by_step() -> None:
    chain = generated([mark(f"s{i}") for i in range(8)])
    stepwise, inline, supersteps = both(chain)
    assert_same(stepwise, inline)
    assert inline.state["context"]["log"] == [f"s{i}" for i in range(8)]
    assert supersteps == 2  # the input, then one node that ran all eight steps

    parallel = generated(
        [
            mark("a"),
            {**mark("b"), "needs": ["a"]},
            {**mark("c"), "needs": ["a"]},
            {**mark("d"), "needs": ["b", "c"]},
            mark("e"),
        ]
    )
    stepwise, inline, supersteps = both(parallel)
    assert_same(stepwise, inline)
    # input, a, b+c together, d, e: as step by step (d sees what b and c wrote)
    assert supersteps == 5


def test_a_retried_step_runs_inline_and_a_max_visits_guard_stops_the_chain(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    # a retried step is retried inside the node (its attempts as LangGraph's retry policy makes
    # them); a max_visits guard ends the chain before it (every cycle passes a LangGraph step)
    flow = """
        flow: stops
        outputs: [log]
        steps:
          - {id: a, uses: mark, with: {tag: a}}
          - {id: b, uses: mark, with: {tag: b}}
          - {id: try, uses: flaky}
          - {id: c, uses: mark, with: {tag: c}}
          - {id: d, uses: mark, with: {tag: d}, max_visits: 2, on_max_visits: e}
          - {id: back, uses: mark, with: {tag: back}, goto: d}
          - {id: e, uses: mark, with: {tag: e}}
        """
    bundle = yard_bundle(make_yard, {"stops": flow}, FLAKY)
    calls = iter([TimeoutError("the first attempt times out"), None, None])

    def flaky() -> dict[str, Any]:
        failure = next(calls)
        if failure is not None:
            raise failure
        return {"ok": True}

    stepwise, inline, supersteps = both(bundle, tools=FakeTools({"flaky": flaky}))
    assert stepwise.error is None, stepwise.error
    calls = iter([TimeoutError("the first attempt times out"), None, None])
    inline, supersteps = asyncio.run(
        run_inline_async(compile_flow(bundle, inline=True), tools=FakeTools({"flaky": flaky}))
    )
    assert_same(stepwise, inline)
    assert inline.state["context"]["log"] == ["a", "b", "c", "d", "back", "d", "back", "e"]
    attempts = [
        e["data"].get("attempt", 1)
        for e in inline.events
        if e["step"] == "try" and e["type"] == "step_started"
    ]
    assert attempts == [1, 2]
    # input; a, b, try (twice), c; the guard of d, d+back (twice); the guard again, e
    assert supersteps == 8


def test_a_failing_step_fails_the_same_way_inline() -> None:
    steps = [
        mark("a"),
        mark("b"),
        {"id": "bad", "uses": "mark", "with": {"tag": "{{ 1 / 0 }}"}},
        mark("c"),
    ]
    stepwise, inline, _ = both(generated(steps))
    assert stepwise.error is not None
    assert_same(stepwise, inline)
    assert [e["step"] for e in inline.events if e["type"] == "step_finished"] == ["a", "b"]


def test_a_flow_with_max_steps_runs_step_by_step() -> None:
    bundle = Bundle.from_source(
        {
            "flow": {
                "flow": "gen",
                "outputs": [],
                "max_steps": 4,
                "steps": [mark(f"s{i}") for i in range(5)],
            },
            "blocks": {"mark": MARK},
            "flows": {},
            "config": {},
        }
    )
    stepwise, inline, _ = both(bundle)
    # its limit counts LangGraph steps
    assert stepwise.error is not None and "4" in str(stepwise.error)
    assert_same(stepwise, inline)


def test_a_long_loop_run_inline_can_still_be_cancelled_midway(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    flow = """
        flow: spin
        outputs: []
        steps:
          - id: spin
            loop:
              max_iterations: 5000
              steps:
                - {id: turn, uses: tick}
        """
    tick = """
        block: tick
        kind: tool
        tool: tick
        inputs: {}
        outputs:
          ok: {type: boolean}
        """
    bundle = yard_bundle(make_yard, {"spin": flow}, {"tick": tick})
    calls: list[int] = []

    def counted() -> dict[str, Any]:
        calls.append(1)
        return {"ok": True}

    run, _ = asyncio.run(
        run_inline_async(
            compile_flow(bundle, inline=True), tools=FakeTools({"tick": counted}), cancel_after=3
        )
    )
    assert isinstance(run.error, asyncio.CancelledError)
    # the cancellation got in after a few stretches of YIELD_EVERY inline steps, not after all 5,000
    # passes (the stream hands its events over, then closes, at the node's next yields)
    assert 1 <= len(calls) <= YIELD_EVERY * 16


@pytest.mark.parametrize("kind", ["router", "decide"])
def test_a_decide_step_and_a_router_go_on_inline(
    kind: str, make_yard: Callable[[dict[str, str]], Path]
) -> None:
    choose = (
        "{id: choose, uses: pick, branches: {yes: y, no: n, maybe: n}}"
        if kind == "decide"
        else '{id: choose, router: {routes: [{expr: "context.log | length == 1", goto: y}], default: n}}'
    )
    flow = f"""
        flow: fork
        outputs: [log]
        steps:
          - {{id: a, uses: mark, with: {{tag: a}}}}
          - {choose}
          - {{id: y, uses: mark, with: {{tag: y}}, goto: z}}
          - {{id: n, uses: mark, with: {{tag: n}}}}
          - {{id: z, uses: mark, with: {{tag: z}}}}
        """
    bundle = yard_bundle(make_yard, {"fork": flow})
    replies = {"choose": [{"choice": "yes"}]} if kind == "decide" else None
    stepwise, inline, supersteps = both(bundle, replies=replies)
    assert stepwise.error is None, stepwise.error
    assert_same(stepwise, inline)
    assert inline.state["context"]["log"] == ["a", "y", "z"]
    # a model block retries transient failures by default, inside the node: a decide step goes on
    # inline as a router does (input, then a+choose+y+z)
    assert supersteps == 2


def test_a_map_runs_its_items_in_the_node_before_and_fails_as_one_step() -> None:
    def mapped(tag: str) -> list[dict[str, Any]]:
        return [
            mark("a"),
            {
                "id": "each",
                "map": {
                    "items": "[1, 2, 3, 4]",
                    "as": "x",
                    "uses": "mark",
                    "with": {"tag": tag, "log": []},
                    "collect": "all",
                },
            },
            mark("b"),
        ]

    stepwise, inline, supersteps = both(generated(mapped("x{{ x }}")))
    assert_same(stepwise, inline)
    assert inline.state["context"]["all"] == [{"log": [f"x{x}"]} for x in (1, 2, 3, 4)]
    assert supersteps == 2  # input, then a + the map's fan-out, its four items and join + b

    # item 2 (only) divides by zero
    stepwise, inline, _ = both(generated(mapped("t{{ 12 // (x - 2) }}")))
    assert stepwise.error is not None
    assert_same(stepwise, inline)


def test_a_subflow_runs_step_by_step_in_its_caller_and_inline_in_its_own_graph(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    child = """
        flow: child
        inputs: {a: {type: number}}
        outputs: [sum, log]
        steps:
          - {id: plus, uses: add, with: {a: "{{ inputs.a }}", b: 1}}
          - {id: note, uses: mark, with: {tag: "child:{{ context.sum }}"}}
          - {id: again, uses: mark, with: {tag: "again"}}
        """
    parent = """
        flow: parent
        inputs: {x: {type: number}}
        outputs: [total, log, child_log]
        steps:
          - {id: first, uses: mark, with: {tag: parent}}
          - {id: call, flow: child, with: {a: "{{ inputs.x }}"}, outputs: {sum: total, log: child_log}}
          - {id: last, uses: mark, with: {tag: "after:{{ context.total }}"}}
        """
    bundle = yard_bundle(make_yard, {"parent": parent, "child": child}, name="parent")
    stepwise, inline, supersteps = both(bundle, {"x": 5})
    assert stepwise.error is None, stepwise.error
    assert_same(stepwise, inline)
    assert inline.outputs == {
        "total": 6,
        "log": ["parent", "after:6"],
        "child_log": ["child:6", "again"],
    }
    assert supersteps == 4  # input, first, the subflow's node (its own graph: one node), last
