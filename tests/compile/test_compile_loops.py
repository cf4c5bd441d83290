"""loop: until / max_iterations / on_exhausted, and back-edges bounded by max_visits."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine.compile import CompiledFlow, StepFailed
from tests.compile.compile_kit import run


def loop_flow(until: str, max_iterations: int, on_exhausted: str = "continue") -> str:
    return f"""
        flow: cycle
        outputs: [n, log]
        steps:
          - {{id: before, uses: mark, with: {{tag: before}}}}
          - id: review
            loop:
              until: "{until}"
              max_iterations: {max_iterations}
              on_exhausted: {on_exhausted}
              steps:
                - {{id: work, uses: inc}}
                - {{id: note, uses: mark, with: {{tag: "n{{{{ context.n }}}}"}}}}
          - {{id: after, uses: mark, with: {{tag: after}}}}
        """


def test_loop_runs_until_the_condition_holds(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(loop_flow("context.n >= 3", 10)))
    assert result.error is None
    assert result.outputs == {"n": 3, "log": ["before", "n1", "n2", "n3", "after"]}
    loop_record = next(r for r in result.state["results"] if r["step"] == "review")
    assert loop_record == {
        "step": "review",
        "block": None,
        "outputs": {"iterations": 3},
        "status": "ok",
    }
    assert result.of("warning") == []
    assert result.state["loops"] == {}  # bookkeeping removed


def test_loop_body_runs_at_least_once(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(loop_flow("true", 10)))
    assert result.outputs == {"n": 1, "log": ["before", "n1", "after"]}


def test_exhausted_loop_continues_with_a_warning(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(loop_flow("context.n > 100", 4)))
    assert result.error is None
    assert result.outputs == {"n": 4, "log": ["before", "n1", "n2", "n3", "n4", "after"]}
    (warning,) = result.of("warning")
    assert warning["step"] == "review"
    assert warning["data"]["code"] == "loop_exhausted"
    assert warning["data"]["message"] == (
        "loop 'review' ran 4 iterations (max_iterations) and "
        "`until: context.n > 100` is still false; going on"
    )
    assert (
        next(r for r in result.state["results"] if r["step"] == "review")["status"] == "exhausted"
    )


def test_exhausted_loop_can_fail_the_run(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(loop_flow("context.n > 100", 2, "fail")))
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == (
        "flow 'cycle', step 'review': loop 'review' ran 2 iterations (max_iterations) "
        "and `until: context.n > 100` is still false"
    )
    assert result.of("step_failed")[-1]["step"] == "review"
    assert "after" not in result.steps


def test_loop_without_until_runs_max_iterations_quietly(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: times
        outputs: [n]
        steps:
          - id: thrice
            loop:
              max_iterations: 3
              steps: [{id: bump, uses: inc}]
        """)
    result = run(compiled)
    assert result.outputs == {"n": 3}
    assert result.of("warning") == []


def test_nested_loops_restart_their_count(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: nested
        outputs: [n]
        steps:
          - id: outer
            loop:
              max_iterations: 3
              steps:
                - id: inner
                  loop:
                    max_iterations: 2
                    steps: [{id: bump, uses: inc}]
        """)
    assert run(compiled).outputs == {"n": 6}


def back_edge(on_max_visits: str) -> str:
    # `check` sends the run back to `draft` until the draft count reaches 5; draft allows 3 visits
    return f"""
        flow: redo
        outputs: [n, log]
        steps:
          - id: draft
            uses: inc
            max_visits: 3
            on_max_visits: {on_max_visits}
          - id: check
            router:
              routes:
                - {{expr: "context.n < 5", goto: draft}}
              default: publish
          - {{id: publish, uses: mark, with: {{tag: publish}}, goto: end}}
          - {{id: give_up, uses: mark, with: {{tag: give_up}}}}
        """


def test_back_edge_to_a_step_goes_on_max_visits(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(back_edge("give_up")))
    assert result.error is None
    assert result.outputs == {"n": 3, "log": ["give_up"]}
    assert result.steps == [
        "draft",
        "check",
        "draft",
        "check",
        "draft",
        "check",
        "draft",
        "give_up",
    ]
    assert result.state["results"][-2] == {
        "step": "draft",
        "block": None,
        "outputs": {"goto": "give_up"},
        "status": "skipped",
    }
    (warning,) = result.of("warning")
    assert warning["data"]["message"] == (
        "step 'draft' was entered more than its max_visits of 3 times; going to 'give_up'"
    )


def test_back_edge_can_end_the_run(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(back_edge("end")))
    assert result.error is None
    assert result.context == {"n": 3}
    assert result.steps[-1] == "draft"


def test_back_edge_can_fail_the_run(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(back_edge("fail")))
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == (
        "flow 'redo', step 'draft': step 'draft' was entered more than its max_visits of 3 times"
    )
    assert result.of("step_failed")[-1]["data"]["error"] == str(result.error.reason)


def test_back_edge_within_the_bound_never_triggers(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(back_edge("fail").replace("max_visits: 3", "max_visits: 5")))
    assert result.error is None
    assert result.outputs == {"n": 5, "log": ["publish"]}


@pytest.mark.parametrize("until", ["context.missing > 1", "1 +"])
def test_bad_until_fails_the_loop_step(build: Callable[..., CompiledFlow], until: str) -> None:
    result = run(build(loop_flow(until, 3)))
    assert isinstance(result.error, StepFailed)
    assert result.error.step == "review"
    assert str(result.error).startswith("flow 'cycle', step 'review': until: ")
