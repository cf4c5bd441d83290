"""Properties over generated flows: the compiled graph runs steps exactly as the flow's rules say."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver

from engine.compile import compile_flow
from engine.definitions.load import parse_value
from engine.definitions.pinned import Bundle
from tests.compile.compile_kit import BLOCKS, FakeTools, Run, run_async

MARK = parse_value(BLOCKS["mark"].replace("\n        ", "\n").strip())


def bundle(steps: list[dict[str, Any]]) -> Bundle:
    flow = {"flow": "gen", "outputs": [], "steps": steps}
    return Bundle.from_source({"flow": flow, "blocks": {"mark": MARK}, "flows": {}, "config": {}})


def execute(steps: list[dict[str, Any]]) -> Run:
    compiled = compile_flow(bundle(steps), checkpointer=InMemorySaver())
    return asyncio.run(run_async(compiled, tools=FakeTools()))


@st.composite
def jumping_chains(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chains whose steps may jump forward (`goto` a later step, or `end`)."""
    size = draw(st.integers(1, 12))
    steps = []
    for i in range(size):
        step: dict[str, Any] = {"id": f"s{i}", "uses": "mark", "with": {"tag": f"s{i}"}}
        choice = draw(st.integers(0, 3))
        if choice == 1 and i + 2 < size:
            step["goto"] = f"s{draw(st.integers(i + 2, size - 1))}"
        elif choice == 2:
            step["goto"] = "end"
        steps.append(step)
    return steps


def expected_order(steps: list[dict[str, Any]]) -> list[str]:
    index = {step["id"]: i for i, step in enumerate(steps)}
    order, position = [], 0
    while position < len(steps):
        step = steps[position]
        order.append(step["id"])
        target = step.get("goto")
        if target == "end":
            break
        position = index[target] if target else position + 1
    return order


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jumping_chains())
def test_list_order_and_goto(steps: list[dict[str, Any]]) -> None:
    result = execute(steps)
    assert result.error is None
    assert result.context.get("log") == expected_order(steps)
    assert result.steps == expected_order(steps)


@st.composite
def dags(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Flows where every step but the first needs one to three earlier steps."""
    size = draw(st.integers(2, 10))
    steps: list[dict[str, Any]] = [{"id": "s0", "uses": "mark", "with": {"tag": "s0", "log": []}}]
    for i in range(1, size):
        needs = sorted(draw(st.sets(st.integers(0, i - 1), min_size=1, max_size=min(3, i))))
        steps.append(
            {
                "id": f"s{i}",
                "uses": "mark",
                "with": {"tag": f"s{i}", "log": []},
                "needs": [f"s{n}" for n in needs],
                "outputs": {"log": f"log{i}"},
            }
        )
    return steps


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_needs_runs_every_step_once_after_what_it_needs(steps: list[dict[str, Any]]) -> None:
    result = execute(steps)
    assert result.error is None
    order = result.steps
    assert sorted(order) == sorted(step["id"] for step in steps)  # each exactly once
    position = {name: i for i, name in enumerate(order)}
    for step in steps:
        for need in step.get("needs", []):
            assert position[need] < position[step["id"]], (need, step["id"], order)
