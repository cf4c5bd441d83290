"""The derived per-run step limit, `max_steps`, and what happens past it."""

from __future__ import annotations

from collections.abc import Callable

from langgraph.errors import GraphRecursionError

from engine.compile import CompiledFlow, StepFailed
from engine.compile.foreach import MAX_ITEMS
from engine.core.errors import RunError
from tests.compile.compile_kit import run


def test_limits_follow_the_flow_bounds(build: Callable[..., CompiledFlow]) -> None:
    chain = build(
        "flow: c\nsteps:\n" + "".join(f"  - {{id: s{i}, uses: inc}}\n" for i in range(10))
    )
    assert chain.recursion_limit == 10 + 1 + 2  # steps, one possible join, LangGraph's own steps
    looped = build("""
        flow: l
        steps:
          - id: cycle
            loop: {max_iterations: 5, steps: [{id: a, uses: inc}, {id: b, uses: inc}]}
        """)
    # loop: start + 1 + 5 × (body 2 + 1 join + check 1); then + 1 join + 2
    assert looped.recursion_limit == (1 + 1 + 5 * (3 + 1)) + 1 + 2
    revisited = build("""
        flow: r
        steps:
          - {id: a, uses: inc, max_visits: 4}
          - id: back
            router: {routes: [{expr: "context.n < 3", goto: a}], default: end}
        """)
    assert revisited.recursion_limit == (2 + 1 + 1) * (1 + 4) + 2
    foreach = build("""
        flow: f
        steps:
          - {id: each, foreach: {items: "[1]", steps: [{id: a, uses: inc}]}}
        """)
    assert foreach.recursion_limit == 1 + MAX_ITEMS * (2 + 1) + 1 + 2


def test_max_steps_overrides_the_derived_limit(build: Callable[..., CompiledFlow]) -> None:
    compiled = build(
        "flow: c\nmax_steps: 4\nsteps:\n"
        + "".join(f"  - {{id: s{i}, uses: inc}}\n" for i in range(10))
    )
    assert compiled.recursion_limit == 4
    result = run(compiled)
    assert isinstance(result.error, GraphRecursionError)
    explained = compiled.explain(result.error)
    assert isinstance(explained, RunError)
    assert str(explained) == (
        "flow 'c' went over its limit of 4 steps (derived from its loop, foreach and "
        "max_visits bounds); raise it with `max_steps:` on the flow"
    )


def test_long_foreach_lists_need_max_steps(build: Callable[..., CompiledFlow]) -> None:
    items = f"range({MAX_ITEMS + 1}) | list"
    flow = f"flow: big\nsteps:\n  - {{id: each, foreach: {{items: '{items}', as: n, steps: [{{id: a, uses: inc}}]}}}}\n"
    result = run(build(flow))
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == (
        f"flow 'big', step 'each': {MAX_ITEMS + 1} items is more than the {MAX_ITEMS} the "
        "flow's derived step limit allows for; set `max_steps` on the flow"
    )


def test_the_explanation_keeps_our_own_errors(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("flow: c\nsteps:\n  - {id: s, uses: inc}\n")
    failure = StepFailed("c", "s", "inc", "boom")
    assert compiled.explain(failure) is failure
    assert str(compiled.explain(KeyError("x"))) == "flow 'c': KeyError: 'x'"
