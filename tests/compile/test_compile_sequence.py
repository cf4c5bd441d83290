"""List order, needs DAGs with barrier joins, goto, start."""

from __future__ import annotations

from collections.abc import Callable

from engine.compile import CompiledFlow
from tests.compile.compile_kit import run


def chain(length: int) -> str:
    steps = "\n".join(f"  - {{id: s{i}, uses: inc}}" for i in range(length))
    return f"flow: chain\noutputs: [n]\nsteps:\n{steps}\n"


def test_a_50_step_chain_runs_every_step_in_order(build: Callable[..., CompiledFlow]) -> None:
    compiled = build(chain(50))
    result = run(compiled)
    assert result.error is None
    assert result.outputs == {"n": 50}
    assert result.steps == [f"s{i}" for i in range(50)]
    assert compiled.recursion_limit >= 51


def test_a_200_step_chain_fits_its_derived_limit(build: Callable[..., CompiledFlow]) -> None:
    compiled = build(chain(200))
    result = run(compiled)
    assert result.error is None
    assert result.outputs == {"n": 200}


def test_needs_runs_independent_branches_in_parallel_and_joins_once(
    build: Callable[..., CompiledFlow],
) -> None:
    # a -> (b1 -> b2 -> b3) and (c1) -> join: unequal branch lengths, join must run once, after all
    compiled = build("""
        flow: dag
        outputs: [total, log]
        steps:
          - {id: a, uses: mark, with: {tag: a}}
          - {id: b1, uses: inc, needs: [a], with: {n: 10}}
          - {id: b2, uses: inc}
          - {id: b3, uses: add, with: {a: "{{ context.n }}", b: 100}}
          - {id: c1, uses: echo, needs: [a], with: {text: "{{ context.log }}"}}
          - id: join
            uses: add
            needs: [b3, c1]
            with: {a: "{{ context.sum }}", b: "{{ context.text | length }}"}
            outputs: {sum: total}
          - {id: last, uses: mark, with: {tag: last}}
        """)
    result = run(compiled)
    assert result.error is None
    assert result.outputs == {"total": 113, "log": ["a", "last"]}
    assert result.steps.count("join") == 1
    order = result.steps
    assert order.index("join") > max(order.index("b3"), order.index("c1"))
    assert order[0] == "a" and order[-1] == "last"


def test_parallel_first_steps_share_supersteps(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: fan
        outputs: [left, right]
        steps:
          - {id: start, uses: inc}
          - {id: l, uses: echo, needs: [start], with: {text: left}, outputs: {text: left}}
          - {id: r, uses: echo, needs: [start], with: {text: right}, outputs: {text: right}}
        """)
    result = run(compiled)
    assert result.outputs == {"left": "left", "right": "right"}
    assert result.steps[0] == "start" and sorted(result.steps[1:]) == ["l", "r"]


def test_goto_skips_ahead_and_goto_end_stops(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: jumps
        outputs: [log]
        steps:
          - {id: a, uses: mark, with: {tag: a}, goto: c}
          - {id: b, uses: mark, with: {tag: b}}
          - {id: c, uses: mark, with: {tag: c}, goto: end}
          - {id: d, uses: mark, with: {tag: d}}
        """)
    result = run(compiled)
    assert result.outputs == {"log": ["a", "c"]}


def test_start_marks_the_entry_step(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: started
        outputs: [log]
        steps:
          - {id: a, uses: mark, with: {tag: a}, goto: end}
          - {id: b, uses: mark, with: {tag: b}, start: true, goto: a}
        """)
    assert run(compiled).outputs == {"log": ["b", "a"]}


def test_renamed_outputs_land_under_their_new_key(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: renames
        outputs: [first, second]
        steps:
          - {id: one, uses: add, with: {a: 1, b: 2}, outputs: {sum: first}}
          - {id: two, uses: add, with: {a: "{{ context.first }}", b: "{{ steps.one.outputs.sum }}"},
             outputs: {sum: second}}
        """)
    result = run(compiled)
    assert result.outputs == {"first": 3, "second": 6}
    assert "sum" not in result.context
    assert result.state["results"][0] == {
        "step": "one",
        "block": "add",
        "outputs": {"sum": 3},
        "status": "ok",
    }


def test_unbound_inputs_read_context_then_flow_inputs_then_defaults(
    build: Callable[..., CompiledFlow],
) -> None:
    compiled = build("""
        flow: binding
        inputs:
          a: {type: number}
          b: {type: number, default: 5}
        outputs: [sum, n]
        steps:
          - {id: first, uses: add}
          - {id: second, uses: inc}
          - {id: third, uses: add, with: {b: 1}, outputs: {sum: sum}}
        """)
    result = run(compiled, {"a": 2})
    # first: a=2, b=5 (flow inputs); second: n defaults to 0; third: a=2 (flow input), b=1
    assert result.outputs == {"sum": 3, "n": 1}
    assert [r["outputs"] for r in result.state["results"]] == [{"sum": 7}, {"n": 1}, {"sum": 3}]


def test_parallel_branches_in_a_loop_body_end_the_pass_once(
    build: Callable[..., CompiledFlow],
) -> None:
    compiled = build("""
        flow: rounds
        outputs: [n, left, right]
        steps:
          - id: cycle
            loop:
              max_iterations: 3
              steps:
                - {id: tick, uses: inc}
                - {id: l, uses: echo, needs: [tick], with: {text: "l{{ context.n }}"}, outputs: {text: left}}
                - {id: r1, uses: echo, needs: [tick], with: {text: "r{{ context.n }}"}, outputs: {text: right}}
                - {id: r2, uses: echo, with: {text: "{{ context.right }}!"}, outputs: {text: right}}
        """)
    result = run(compiled)
    assert result.error is None
    assert result.outputs == {"n": 3, "left": "l3", "right": "r3!"}
    # one `tick` per pass: the pass ended once per iteration although two branches ran
    assert result.steps.count("tick") == 3
    assert result.steps.count("cycle") == 1


def test_a_step_can_wait_for_a_loop_and_a_foreach(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: waits
        outputs: [n, log, sum]
        steps:
          - {id: go, uses: mark, with: {tag: go}}
          - id: spin
            needs: [go]
            loop: {max_iterations: 2, steps: [{id: bump, uses: inc}]}
          - id: walk
            needs: [go]
            foreach: {items: "['a', 'b', 'c']", as: tag, steps: [{id: m, uses: mark}]}
          - {id: both, uses: add, needs: [spin, walk], with: {a: "{{ context.n }}", b: "{{ context.log | length }}"}}
        """)
    result = run(compiled)
    assert result.error is None
    assert result.outputs == {"n": 2, "log": ["go", "a", "b", "c"], "sum": 6}
    assert result.steps.count("both") == 1 and result.steps[-1] == "both"
