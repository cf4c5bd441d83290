"""Routers and loop checks run inline by the plain step before them: same events, records and
routing as two nodes, one superstep (and checkpoint) fewer per router or loop pass."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from engine.compile import CompiledFlow
from tests.compile.compile_kit import run


def checkpoints(compiled: CompiledFlow, thread: str) -> int:
    async def count() -> int:
        return len(
            [
                s
                async for s in compiled.graph.aget_state_history(
                    {"configurable": {"thread_id": thread}}
                )
            ]
        )

    return asyncio.run(count())


def kinds(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["step"]) for e in events]


def test_a_loop_check_runs_inside_the_last_body_step(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: grow
        outputs: [n]
        steps:
          - id: again
            loop:
              until: context.n >= 3
              max_iterations: 10
              steps:
                - {id: step, uses: inc}
        """)
    result = run(compiled, {})
    assert result.error is None and result.outputs == {"n": 3}
    assert kinds(result.events) == [
        ("step_started", "again"),
        *[("step_started", "step"), ("step_finished", "step")] * 3,
        ("step_finished", "again"),
    ]
    assert result.steps == ["step", "step", "step", "again"]
    assert result.state["loops"] == {}
    thread = next(iter(compiled.graph.checkpointer.storage))  # type: ignore[union-attr]
    # input, loop start, three passes (each one node): 5 supersteps, 6 checkpoints with the empty one
    assert checkpoints(compiled, thread) == 6


def test_a_router_runs_inside_the_step_before_it_and_alone_from_elsewhere(
    build: Callable[..., CompiledFlow],
) -> None:
    compiled = build("""
        flow: pick
        outputs: [n]
        steps:
          - id: first
            router:
              routes: [{expr: "context.n is defined", goto: bump}]
              default: bump
          - {id: bump, uses: inc, max_visits: 5}
          - id: second
            router:
              routes: [{expr: "context.n < 3", goto: bump}]
              default: end
        """)
    result = run(compiled, {})
    assert result.error is None and result.outputs == {"n": 3}
    assert result.steps == ["first", "bump", "second", "bump", "second", "bump", "second"]
    assert [r["outputs"] for r in result.state["results"] if r["step"] == "second"] == [
        {"goto": "bump"},
        {"goto": "bump"},
        {"goto": "end"},
    ]
    assert kinds(result.of("step_finished"))[:3] == [
        ("step_finished", "first"),
        ("step_finished", "bump"),
        ("step_finished", "second"),
    ]
    assert result.state["loops"] == {"bump.v": 3}


def test_a_failing_inline_until_fails_the_loop_step(build: Callable[..., CompiledFlow]) -> None:
    result = run(
        build("""
        flow: broken
        outputs: [n]
        steps:
          - id: again
            loop:
              until: context.n >= missing.value
              max_iterations: 3
              steps:
                - {id: step, uses: inc}
        """),
        {},
    )
    assert result.error is not None and "until:" in str(result.error)
    failed = result.of("step_failed")
    assert [(e["step"], e["data"]["error"].startswith("until:")) for e in failed] == [
        ("again", True)
    ]
    assert kinds(result.of("step_finished")) == [("step_finished", "step")]


def test_a_foreach_runs_inline_after_the_step_before_it_and_per_item(
    build: Callable[..., CompiledFlow],
) -> None:
    compiled = build("""
        flow: tags
        outputs: [log, lines]
        steps:
          - {id: first, uses: mark, with: {tag: a}}
          - id: each
            foreach:
              items: "['x', 'y', 'z']"
              as: tag
              collect: lines
              steps: [{id: m, uses: mark}]
        """)
    result = run(compiled, {})
    assert result.error is None
    assert result.outputs["log"] == ["a", "x", "y", "z"]
    assert [line["log"] for line in result.outputs["lines"]] == [
        ["a", "x"],
        ["a", "x", "y"],
        ["a", "x", "y", "z"],
    ]
    assert result.steps == ["first", "m", "m", "m", "each"]
    assert kinds(result.events)[:3] == [
        ("step_started", "first"),
        ("step_finished", "first"),
        ("step_started", "each"),
    ]
    assert result.state["loops"] == {}
    thread = next(iter(compiled.graph.checkpointer.storage))  # type: ignore[union-attr]
    # input, first + foreach start, three items (each one node): 5 supersteps, 6 checkpoints
    assert checkpoints(compiled, thread) == 6
