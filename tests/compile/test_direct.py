"""A run without checkpoints of a graph whose every node runs inline goes without LangGraph's loop
(engine/compile/direct.py): the same events, state, outputs and failures as the graph run step by
step and as the inline graph run by LangGraph, the same step limit; LangGraph's loop wherever a
node must be LangGraph's (parallel branches, a `max_visits` guard, a subflow, a step limit of the
flow's own, checkpoints)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

from engine.compile import CompiledFlow, RunContext, compile_flow
from engine.compile.direct import Direct
from engine.compile.inline import Inline, Items
from engine.definitions.pinned import Bundle
from engine.models import scripted
from engine.runtime.direct_runs import plan_for
from tests.compile.compile_kit import FakeTools, Run, run_async, yard_bundle
from tests.compile.test_compile_run_inline import (
    FLAKY,
    assert_same,
    context_for,
    generated,
    mark,
    run_inline_async,
    sequential_flows,
)

AGENT = """
    block: helper
    kind: agent
    tools: []
    inputs:
      task: {type: string}
    outputs:
      answer: {type: string}
    prompt:
      user: "{{ task }}"
    """


async def run_direct_async(
    compiled: CompiledFlow,
    inputs: dict[str, Any] | None = None,
    *,
    tools: FakeTools | None = None,
    replies: dict[str, list[Any]] | None = None,
    limit: int | None = None,
    context: RunContext | None = None,
) -> tuple[Run, int]:
    """The flow run without LangGraph's loop; the run and how many node calls (LangGraph supersteps)
    it took."""
    plan = compiled.direct
    assert plan is not None, "the flow runs with LangGraph's loop"
    calls = 0
    runner = Inline.runner

    def counted(inline: Inline, name: str) -> Any:
        node = runner(inline, name)

        async def call(state: Any, runtime: Any) -> Any:
            nonlocal calls
            calls += 1
            return await node(state, runtime)

        return call

    Inline.runner = counted  # type: ignore[method-assign,assignment]  # this run's node calls, counted
    run = Run({}, compiled=compiled)
    with scripted("run-1", replies or {}) as script:
        run.model_calls = script.calls
        try:
            run.state = await plan.run(
                compiled.initial_state(dict(inputs or {})),
                context or context_for(compiled, "run-1", tools),
                lambda data: run.events.append(cast("dict[str, Any]", data)),
                compiled.recursion_limit if limit is None else limit,
            )
        except Exception as exc:  # the test inspects it
            run.error = exc
        finally:
            Inline.runner = runner  # type: ignore[method-assign]
    return run, calls


def three(
    bundle: Bundle, inputs: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[Run, Run, Run, int]:
    """The flow run step by step, inline by LangGraph and without LangGraph; and the direct run's node
    calls. A kwarg `tools` may be a function making fresh tools for each run."""
    maker = kwargs.pop("tools", None)

    def tools() -> Any:
        return maker() if callable(maker) else maker

    stepwise = asyncio.run(
        run_async(
            compile_flow(bundle, checkpointer=InMemorySaver()), inputs, tools=tools(), **kwargs
        )
    )
    inline, _ = asyncio.run(
        run_inline_async(compile_flow(bundle, inline=True), inputs, tools=tools(), **kwargs)
    )
    direct, calls = asyncio.run(
        run_direct_async(compile_flow(bundle, inline=True), inputs, tools=tools(), **kwargs)
    )
    return stepwise, inline, direct, calls


def assert_all_same(stepwise: Run, inline: Run, direct: Run) -> None:
    assert_same(stepwise, inline)
    assert_same(stepwise, direct)
    if stepwise.error is None:
        assert direct.state == inline.state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequential_flows())
def test_generated_flows_give_the_same_run_without_langgraph(steps: list[dict[str, Any]]) -> None:
    stepwise, inline, direct, calls = three(generated(steps), tools=FakeTools)
    assert stepwise.error is None, stepwise.error
    assert_all_same(stepwise, inline, direct)
    assert calls == 1  # one node ran every step


def test_a_failing_step_and_a_retried_one_fail_and_retry_the_same_way() -> None:
    failing = [mark("a"), {"id": "bad", "uses": "mark", "with": {"tag": "{{ 1 / 0 }}"}}, mark("c")]
    stepwise, inline, direct, _ = three(generated(failing))
    assert stepwise.error is not None
    assert_all_same(stepwise, inline, direct)
    assert [e["step"] for e in direct.events if e["type"] == "step_finished"] == ["a"]


def test_a_retried_step_counts_its_attempts_as_langgraph_does(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    flow = """
        flow: retried
        outputs: [log]
        steps:
          - {id: a, uses: mark, with: {tag: a}}
          - {id: try, uses: flaky}
          - {id: c, uses: mark, with: {tag: c}}
        """
    bundle = yard_bundle(make_yard, {"retried": flow}, FLAKY)

    def tools() -> FakeTools:
        calls = iter([TimeoutError("the first attempt times out"), None])

        def flaky() -> dict[str, Any]:
            failure = next(calls)
            if failure is not None:
                raise failure
            return {"ok": True}

        return FakeTools({"flaky": flaky})

    stepwise, inline, direct, _ = three(bundle, tools=tools)
    assert stepwise.error is None, stepwise.error
    assert_all_same(stepwise, inline, direct)
    attempts = [
        e["data"].get("attempt", 1)
        for e in direct.events
        if e["step"] == "try" and e["type"] == "step_started"
    ]
    assert attempts == [1, 2]


def test_steps_that_write_messages_end_a_node_and_count_against_the_step_limit(
    make_yard: Callable[[dict[str, str]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # an agent's conversation goes to `messages` (outside a conversation thread), whose reducer sees
    # each update on its own: the node returns after it, and the next node is one more LangGraph step;
    # a map's fan-out run with it sends its items as LangGraph tasks, one LangGraph step more
    flow = """
        flow: talk
        outputs: [log]
        steps:
          - {id: a, uses: mark, with: {tag: a}}
          - {id: ask, uses: helper, with: {task: first}}
          - id: each
            map: {items: "['x', 'y', 'z']", as: x, uses: mark, with: {tag: "{{ x }}", log: []}, collect: tags}
          - {id: again, uses: helper, with: {task: second}}
          - {id: z, uses: mark, with: {tag: z}}
        """
    compiled = compile_flow(yard_bundle(make_yard, {"talk": flow}, {"helper": AGENT}), inline=True)

    def context() -> RunContext:
        return dataclasses.replace(context_for(compiled, "run-1", None), thread_id=None)

    async def with_langgraph(limit: int) -> Run:
        run = Run({}, compiled=compiled)
        config = {**compiled.config("t"), "recursion_limit": limit}
        try:
            async for mode, data in compiled.graph.astream(
                compiled.initial_state({}),
                cast("RunnableConfig", config),
                context=context(),
                stream_mode=["custom", "values"],
            ):
                if mode == "custom":
                    run.events.append(cast("dict[str, Any]", data))
                else:
                    run.state = dict(cast("dict[str, Any]", data))
        except GraphRecursionError as exc:
            run.error = exc
        return run

    sent: list[int] = []
    run_items = Inline.run_items

    async def counted(self: Inline, items: Items, runtime: Any) -> Any:
        sent.append(len(items.args))
        return await run_items(self, items, runtime)

    monkeypatch.setattr(Inline, "run_items", counted)
    for limit in (*range(1, 7), compiled.recursion_limit):
        with scripted("run-1", {}):
            langgraph = asyncio.run(with_langgraph(limit))
        with scripted("run-1", {}):
            direct, calls = asyncio.run(run_direct_async(compiled, limit=limit, context=context()))
        assert_same(langgraph, direct)
        assert (type(direct.error), str(direct.error)) == (
            type(langgraph.error),
            str(langgraph.error),
        )
        # a+ask (and the map's fan-out), its items, the join+again, z, and LangGraph's last step
        assert (direct.error is None) == (limit >= 5), limit
        if direct.error is None:
            said = [message.pop("messages") for message in (direct.state, langgraph.state)]
            assert direct.state == langgraph.state
            # as LangGraph's reducer leaves them: messages with ids (new ones, in each run)
            assert [(m.type, m.content) for m in said[0]] == [(m.type, m.content) for m in said[1]]
            assert len(said[0]) >= 4 and all(message.id for message in said[0])
            assert calls == 3
            assert sent == [3]
        sent.clear()


def test_what_needs_a_langgraph_node_runs_with_langgraph(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    chain = generated([mark(f"s{i}") for i in range(4)])
    plan = compile_flow(chain, inline=True).direct
    assert isinstance(plan, Direct) and plan.durable
    durable = compile_flow(chain, inline=True, checkpointer=InMemorySaver())
    # which runs go without LangGraph's loop (engine/runtime/direct_runs.py): not `exit` (its one
    # checkpoint is where a failed run resumes), nor a conversation's turn (its thread's checkpoints
    # hold the conversation)
    assert {
        mode: plan_for(durable, mode, None) is not None
        for mode in ("sync", "async", "exit", "none")
    } == {
        "sync": True,
        "async": True,
        "exit": False,
        "none": True,
    }
    assert plan_for(durable, "sync", "thread-1") is None
    # an agent's conversation goes to `messages`: only a run without checkpoints goes without
    talks = yard_bundle(
        make_yard,
        {"talk": "flow: talk\noutputs: []\nsteps:\n  - {id: ask, uses: helper, with: {task: t}}\n"},
        {"helper": AGENT},
    )
    compiled = compile_flow(talks, inline=True)
    assert compiled.direct is not None and not compiled.direct.durable
    assert plan_for(compiled, "none", None) is not None and plan_for(compiled, "sync", None) is None
    # a graph for step-by-step runs has LangGraph's nodes
    assert compile_flow(chain).direct is None

    parallel = generated(
        [mark("a"), {**mark("b"), "needs": ["a"]}, {**mark("c"), "needs": ["a"]}, mark("d")]
    )
    guarded = """
        flow: guarded
        outputs: [log]
        steps:
          - {id: d, uses: mark, with: {tag: d}, max_visits: 2, on_max_visits: e}
          - {id: back, uses: mark, with: {tag: back}, goto: d}
          - {id: e, uses: mark, with: {tag: e}}
        """
    child = """
        flow: child
        outputs: [log]
        steps:
          - {id: one, uses: mark, with: {tag: one}}
        """
    parent = """
        flow: parent
        outputs: [log]
        steps:
          - {id: call, flow: child, outputs: {log: log}}
        """
    limited = Bundle.from_source(
        {
            "flow": {"flow": "gen", "outputs": [], "max_steps": 9, "steps": [mark("a")]},
            "blocks": {"mark": chain.blocks["mark"].model_dump(exclude_none=True)},
            "flows": {},
            "config": {},
        }
    )
    for bundle in (
        parallel,
        yard_bundle(make_yard, {"guarded": guarded}),
        yard_bundle(make_yard, {"parent": parent, "child": child}, name="parent"),
        limited,
    ):
        assert compile_flow(bundle, inline=True).direct is None, bundle.name


def test_a_cancelled_run_without_langgraph_stops_midway(
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
                - {id: turn, uses: mark, with: {tag: t}}
        """
    compiled = compile_flow(yard_bundle(make_yard, {"spin": flow}), inline=True)
    plan = compiled.direct
    assert plan is not None
    events: list[Mapping[str, Any]] = []

    async def main() -> None:
        task = asyncio.ensure_future(
            plan.run(
                compiled.initial_state({}),
                context_for(compiled, "run-1", None),
                events.append,
                compiled.recursion_limit,
            )
        )
        while len(events) < 3:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait([task])
        assert task.cancelled()

    asyncio.run(main())
    # the cancellation got in after a stretch of inline steps, not after all 5,000 passes
    assert 3 <= len(events) < 200
