"""Semantic checks on small flows: tricky-but-correct flows stay clean, and each mistake gets one exact message."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.definitions.project import load_project
from engine.validate.semantic import check_project

MakeYard = Callable[[dict[str, str]], Path]

BLOCKS = {
    "blocks/t.yaml": """
        block: t
        kind: transform
        inputs: {x: {type: any, default: 1}}
        outputs: {y: {type: any}}
        compute: {y: x}
        """,
    "blocks/u.yaml": """
        block: u
        kind: transform
        inputs: {x: {type: any, default: 1}}
        outputs: {z: {type: any}}
        compute: {z: x}
        """,
    "blocks/need.yaml": """
        block: need
        kind: transform
        inputs: {y: {type: any}}
        outputs: {w: {type: any}}
        compute: {w: y}
        """,
    "blocks/d.yaml": """
        block: d
        kind: decide
        outputs: {c: {type: string, enum: [again, done]}}
        prompt: {user: Again?}
        """,
}


def problems(make_yard: MakeYard, flow: str, **files: str) -> list[str]:
    root = make_yard({**BLOCKS, "flows/f.yaml": flow, **files})
    project = load_project(root)
    assert [d.format() for d in project.diagnostics] == []
    return [d.format() for d in check_project(project)]


# -- clean: flows that are tricky but right ------------------------------------------------------------


@pytest.mark.parametrize(
    "flow",
    [
        pytest.param(
            """
        flow: f
        outputs: [w, z]
        steps:
          - {id: a, uses: t}
          - {id: b, uses: u, needs: [a]}
          - {id: c, uses: t, needs: [a], outputs: {y: y2}}
          - {id: j, uses: need, needs: [b, c], with: {y: "{{ context.y2 }} {{ context.z }}"}}
        """,
            id="join-sees-every-branch",
        ),
        pytest.param(
            """
        flow: f
        outputs: [w]
        steps:
          - {id: a, uses: t, max_visits: 3, on_max_visits: use}
          - {id: check, uses: d, branches: {again: a, done: use}}
          - {id: use, uses: need}
        """,
            id="bounded-back-edge-and-exit-after-a-revisit",
        ),
        pytest.param(
            """
        flow: f
        outputs: [y, w]
        steps:
          - id: outer
            loop:
              max_iterations: 3
              until: context.w and steps.inner_loop.outputs
              steps:
                - id: inner_loop
                  loop:
                    max_iterations: 2
                    until: steps.first.outputs.y
                    steps:
                      - {id: first, uses: t}
                - {id: after, uses: need}
          - {id: last, uses: need}
        """,
            id="nested-loops-run-at-least-once",
        ),
        pytest.param(
            """
        flow: f
        inputs: {docs: {type: array}}
        outputs: [rows]
        steps:
          - id: fan
            map:
              items: inputs.docs
              as: doc
              max_concurrency: 2
              collect: rows
              steps:
                - {id: one, uses: t, with: {x: "{{ doc }}"}}
                - {id: two, uses: need, with: {y: "{{ steps.one.outputs.y }} {{ context.y }}"}}
        """,
            id="map-with-a-steps-body",
        ),
        pytest.param(
            """
        flow: f
        outputs: [z]
        steps:
          - {id: a, uses: t}
          - {id: maybe, uses: u, with: {x: "{{ context.w | default('none') }}"}}
          - {id: guard, uses: u, with: {x: "{{ context.w if context.w is defined else 0 }}"}}
        """,
            id="optional-context-reads",
        ),
        pytest.param(
            """
        flow: f
        outputs: [z]
        steps:
          - {id: a, uses: t}
          - {id: c, uses: u, with: {x: "{{ steps.b.outputs.c }}"}, goto: end}
          - {id: b, uses: d, start: true, branches: {again: a, done: c}}
        """,
            id="start-marker",
        ),
    ],
)
def test_tricky_but_correct_flows_are_clean(make_yard: MakeYard, flow: str) -> None:
    assert problems(make_yard, flow) == []


# -- dataflow -----------------------------------------------------------------------------------------


def test_input_written_on_one_branch_only(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: pick, uses: d, branches: {again: writer, done: reader}}
          - {id: writer, uses: t}
          - {id: reader, uses: need}
        """,
    ) == [
        "flows/f.yaml:5:24: error BY405 step 'reader': input 'y' of block 'need' is not bound; context key 'y' is "
        "written by step 'writer', but not on every path to 'reader' (bind it with `with: {y: ...}`)",
    ]


def test_parallel_branch_is_not_upstream(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: u}
          - {id: b, uses: t, needs: [a]}
          - {id: c, uses: need, needs: [a]}
        """,
    ) == [
        "flows/f.yaml:5:19: error BY405 step 'c': input 'y' of block 'need' is not bound; context key 'y' is "
        "written by step 'b', which is not certain to finish before 'c' starts (bind it with `with: {y: ...}`)",
    ]


def test_foreach_may_run_zero_times_but_its_collect_is_always_written(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        outputs: [rows, y]
        steps:
          - id: each
            foreach: {items: "[1, 2]", collect: rows, steps: [{id: body, uses: t}]}
        """,
    ) == [
        "flows/f.yaml:2:17: warning BY409 flow output 'y' is not written on the path each → end (step 'body' "
        "writes it); runs that end that way fail (declare it `{optional: true}` or give it a `default:` if that "
        "is expected)",
    ]


def test_map_items_keep_their_outputs(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - id: fan
            map: {items: "[1, 2]", uses: t, collect: rows}
          - {id: after, uses: need}
        """,
    ) == [
        "flows/f.yaml:5:23: error BY405 step 'after': input 'y' of block 'need' is not bound; context key 'y' is "
        "only written by each item of the map of step 'fan', and map items keep their outputs to themselves "
        "(gather them with the map's `collect:`) (bind it with `with: {y: ...}`)",
    ]


def test_input_names_flow_input_item_and_default_bind(make_yard: MakeYard) -> None:
    assert (
        problems(
            make_yard,
            """
        flow: f
        inputs: {y: {type: any}}
        steps:
          - {id: from_flow_input, uses: need}
          - id: each
            foreach:
              items: "[1]"
              as: y
              steps: [{id: from_item, uses: need}]
        """,
        )
        == []
    )


def test_parallel_writers_inside_a_loop_body_count(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: u}
          - id: lp
            needs: [a]
            loop: {max_iterations: 2, steps: [{id: inner, uses: t}]}
          - {id: b, uses: t, needs: [a]}
        """,
    ) == [
        "flows/f.yaml:7:10: error BY406 steps 'lp' and 'b' may run in parallel and both write context key 'y'; "
        "rename one with `outputs:`, or order them with `needs:`",
    ]


def test_step_reference_not_upstream_and_unknown_output(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t, with: {x: "{{ steps.b.outputs.z }}"}}
          - {id: b, uses: t, with: {x: "{{ steps.a.outputs.z }} {{ steps.a.result }} {{ steps.b.outputs.y }}"}}
        """,
    ) == [
        "flows/f.yaml:3:32: error BY403 step 'a': step 'b' does not finish before this step, so steps.b may not "
        "exist yet",
        "flows/f.yaml:4:32: error BY216 step 'b': step 'a' has no output 'z' (its outputs are 'y')",
        "flows/f.yaml:4:32: error BY403 step 'b': a step cannot read its own outputs (steps.b)",
        "flows/f.yaml:4:32: error BY403 step 'b': steps.a has only `outputs` (write steps.a.outputs.<name>), "
        "not 'result'",
    ]


# -- follow-on noise is held back ---------------------------------------------------------------------


def test_a_broken_flow_skips_graph_and_dataflow_checks(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        outputs: [nothing_writes_this]
        steps:
          - {id: a, uses: nope, goto: b}
          - {id: unreachable_if_checked, uses: need}
          - {id: b, uses: t}
        """,
    ) == ["flows/f.yaml:4:19: error BY210 step 'a' uses unknown block 'nope'"]


def test_a_block_that_failed_to_load_is_named_as_such(make_yard: MakeYard) -> None:
    root = make_yard(
        {
            **BLOCKS,
            "blocks/broken.yaml": "block: broken\nkind: nonsense\n",
            "flows/f.yaml": """
        flow: f
        steps:
          - {id: a, uses: broken}
        """,
        }
    )
    project = load_project(root)
    assert [d.code for d in project.diagnostics] == ["BY105"]
    assert [d.format() for d in check_project(project)] == [
        "flows/f.yaml:3:19: error BY210 step 'a' uses block 'broken', which did not load: fix the problems "
        "reported in blocks/broken.yaml",
    ]


def test_unreachable_reports_where_the_lost_part_starts(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t, goto: end}
          - {id: lost, uses: t}
          - {id: also_lost, uses: t}
        """,
    ) == [
        "flows/f.yaml:4:10: error BY305 step 'lost' is unreachable: no path from the entry step 'a' of the flow "
        "leads to it; the step before it, 'a', does not continue to it (name it in a goto, branch or route, or "
        "remove it)",
    ]


def test_cycle_without_exit_is_a_dead_end_and_unbounded(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - {id: b, uses: t, goto: a}
        """,
    ) == [
        "flows/f.yaml:3:10: error BY306 steps 'a', 'b' go round in a cycle with no way out: no path from 'a' "
        "reaches the end of the flow (give the cycle an exit, e.g. a router default or on_max_visits: end)",
        "flows/f.yaml:4:28: error BY307 step 'b' goes back to 'a' (a -> b -> a) and no step on this cycle has "
        "max_visits, so it could run forever: add max_visits: N (and on_max_visits) to 'a', or use a loop: with "
        "max_iterations",
    ]


def test_loop_body_targets_stay_in_the_body(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - id: lp
            loop:
              max_iterations: 2
              steps: [{id: inner, uses: t, goto: a}]
        """,
    ) == [
        "flows/f.yaml:7:42: error BY213 step 'inner' names step 'a', which is in the flow; steps in the loop "
        "body of step 'lp' can only go to steps of the same list (or `end`)",
    ]


def test_check_project_is_deterministic_and_sorted(make_yard: MakeYard) -> None:
    flow = """
        flow: f
        outputs: [q]
        steps:
          - {id: a, uses: t, with: {x: "{{ context.nope }} {{ inputs.nope }}"}}
          - {id: b, uses: need, needs: [zz]}
        """
    first = problems(make_yard, flow)
    assert first == sorted(
        first,
        key=lambda line: (line.split(":")[0], int(line.split(":")[1]), int(line.split(":")[2])),
    )
    assert problems(make_yard, flow) == first


def test_needs_cannot_name_end_and_mapping_methods_are_not_keys(make_yard: MakeYard) -> None:
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t, with: {x: "{{ context.get('later', 0) }} {{ inputs.keys() | list }}"}}
          - {id: b, uses: t, needs: [a, end]}
        """,
    ) == [
        "flows/f.yaml:4:33: error BY212 step 'b' needs `end`, which is no step: `needs` names steps that must "
        "finish first",
    ]


def test_a_block_named_after_another_file_says_which_id_the_file_defines(
    make_yard: MakeYard,
) -> None:
    # blocks/greet.yaml defines `block: hello`: 'greet' is no typo of a block id, and the message says why
    greet = "block: hello\nkind: transform\noutputs: {x: {type: any}}\ncompute: {x: '1'}\n"
    flow = """
        flow: f
        steps:
          - {id: a, uses: greet}
        """
    assert problems(make_yard, flow, **{"blocks/greet.yaml": greet}) == [
        "flows/f.yaml:3:19: error BY210 step 'a' uses unknown block 'greet': blocks/greet.yaml defines block "
        "'hello' (a step names a block by its `block:` id; use 'hello', or rename it)"
    ]
