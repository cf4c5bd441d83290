"""Subflow steps: explicit input/output mapping, renames, events and failures."""

from __future__ import annotations

from collections.abc import Callable

from engine.compile import CompiledFlow, StepFailed
from tests.compile.compile_kit import run

CHILD = """
    flow: child
    inputs:
      a: {type: number}
      b: {type: number, default: 10}
    outputs: [sum, log]
    steps:
      - {id: plus, uses: add}
      - {id: note, uses: mark, with: {tag: "child:{{ context.sum }}"}}
    """

PARENT = """
    flow: parent
    inputs:
      x: {type: number}
    outputs: [total, log, child_log]
    steps:
      - {id: first, uses: mark, with: {tag: parent}}
      - id: research
        flow: child
        with: {a: "{{ inputs.x }}"}
        outputs: {sum: total, log: child_log}
      - {id: last, uses: mark, with: {tag: "after:{{ context.total }}"}}
    """


def test_subflow_maps_inputs_and_renamed_outputs(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(PARENT, subflows={"child": CHILD}), {"x": 5})
    assert result.error is None
    # the child's `log` starts empty (nothing but its inputs crosses), and comes back renamed
    assert result.outputs == {"total": 15, "log": ["parent", "after:15"], "child_log": ["child:15"]}
    assert result.steps == ["first", "research", "last"]  # the child's records stay in the child
    assert result.state["results"][1] == {
        "step": "research",
        "block": None,
        "flow": "child",
        "status": "ok",
        "outputs": {"sum": 15, "log": ["child:15"]},
    }


def test_subflow_events_carry_the_calling_step(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(PARENT, subflows={"child": CHILD}), {"x": 1})
    started = [e["step"] for e in result.of("step_started")]
    assert started == ["first", "research", "research.plus", "research.note", "last"]


def test_unbound_subflow_inputs_read_the_context(build: Callable[..., CompiledFlow]) -> None:
    compiled = build(
        """
        flow: parent
        outputs: [sum]
        steps:
          - {id: seed, uses: add, with: {a: 1, b: 1}, outputs: {sum: a}}
          - {id: call, flow: child, with: {b: 3}}
        """,
        subflows={"child": CHILD},
    )
    assert run(compiled).outputs == {"sum": 5}


def test_subflow_failure_names_both_steps(build: Callable[..., CompiledFlow]) -> None:
    compiled = build(
        """
        flow: parent
        outputs: [sum]
        steps:
          - {id: call, flow: child, with: {a: "not a number"}}
        """,
        subflows={"child": CHILD},
    )
    result = run(compiled)
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == (
        "flow 'parent', step 'call': flow 'child': input 'a' must be a number, "
        "got string 'not a number'"
    )


def test_failure_inside_the_subflow(build: Callable[..., CompiledFlow]) -> None:
    child = CHILD.replace("{id: plus, uses: add}", '{id: plus, uses: add, with: {b: "{{ nope }}"}}')
    result = run(build(PARENT, subflows={"child": child}), {"x": 5})
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == (
        "flow 'parent', step 'research': subflow 'child' failed at step 'research.plus': "
        "input 'b': cannot evaluate 'nope': 'nope' is undefined"
    )
    assert [e["step"] for e in result.of("step_failed")] == ["research.plus", "research"]


def test_subflow_inside_a_subflow(build: Callable[..., CompiledFlow]) -> None:
    middle = """
        flow: middle
        inputs:
          a: {type: number}
        outputs: [sum]
        steps:
          - {id: inner, flow: child, with: {a: "{{ inputs.a * 2 }}"}}
        """
    compiled = build(
        """
        flow: top
        outputs: [sum]
        steps:
          - {id: outer, flow: middle, with: {a: 4}}
        """,
        subflows={"middle": middle, "child": CHILD},
    )
    result = run(compiled)
    assert result.outputs == {"sum": 18}
    assert "outer.inner.plus" in [e["step"] for e in result.of("step_finished")]
