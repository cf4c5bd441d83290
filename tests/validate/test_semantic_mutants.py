"""What `blockyard validate` reports, pinned where mutation testing found it unpinned (docs/testing.md,
"Mutation testing"): each test holds one promise of a semantic check — the code, the exact message, the
file:line:col it points at, or that a problem is reported at all — and its comment names the surviving
mutants it kills, as the mutation report names them, after `engine.validate.semantic.`."""

from __future__ import annotations

from pathlib import Path

from engine.definitions.project import load_project
from engine.validate.semantic import check_closure, check_project
from tests.validate.test_semantic_budgets import CONFIG, FAN, _found, _yard
from tests.validate.test_semantic_flows import BLOCKS, MakeYard, problems

FAN_OF_STEPS = """\
flow: fan
inputs: {topics: {type: array}}
outputs: [scores]
budget: {cost_usd: 2.5}
steps:
  - id: each
    map:
      items: inputs.topics
      collect: scores
      steps:
        - {id: one, uses: judge, with: {text: "{{ item }}"}}
"""
CYCLE = (
    "and no step on this cycle has max_visits, so it could run forever: add max_visits: N (and on_max_visits) "
    "to 'a', or use a loop: with max_iterations"
)
UNWRITTEN = "runs that end that way fail (declare it `{optional: true}` or give it a `default:` if that is expected)"
NO_ENUM = "a decide block needs exactly one output with an `enum:` of its choices"


def found(root: Path) -> list[str]:
    """Every semantic problem of the yard at `root`, which loads without one."""
    project = load_project(root)
    assert [d.format() for d in project.diagnostics] == []
    return [d.format() for d in check_project(project)]


def agent_chain(levels: int) -> dict[str, str]:
    """Agent blocks a0 -> a1 -> ... each delegating to the next: `levels` levels deep from a0."""
    head = "kind: agent\noutputs: {answer: {type: string}}\nprompt: {user: hi}\n"
    return {
        f"blocks/a{i}.yaml": f"block: a{i}\n{head}"
        + (f"delegates: [a{i + 1}]\n" if i + 1 < levels else "")
        for i in range(levels)
    }


# -- where a problem is reported ----------------------------------------------------------------------


def test_a_subflow_step_nested_too_deep_is_reported_at_its_flow_name(make_yard: MakeYard) -> None:
    # kills agents.x__key__mutmut_2 (BY440 of a `flow:` step at the step, not at the flow it names)
    chain = " -> ".join(f"agent block 'a{i}'" for i in range(9))
    tail = (
        f"delegation is nested more than 8 levels deep ({chain}); agents and the flows they delegate to nest at "
        "most 8 levels"
    )
    assert problems(
        make_yard,
        "flow: f\nsteps:\n  - {id: t, flow: deep}\n",
        **agent_chain(9),
        **{"flows/deep.yaml": "flow: deep\nsteps:\n  - {id: s, uses: a0}\n"},
    ) == [
        f"flows/deep.yaml:3:19: error BY440 step 's': {tail}",
        f"flows/f.yaml:3:19: error BY440 step 't': {tail}",
    ]


def test_a_decide_block_without_outputs_is_reported_at_its_kind(make_yard: MakeYard) -> None:
    # kills blocks.xǁBlockCheckǁrequirements__mutmut_72 (BY353 at the file's first line, not at `kind:`)
    assert problems(
        make_yard,
        "flow: f\nsteps:\n  - {id: a, uses: t}\n",
        **{"blocks/p.yaml": "block: p\nkind: decide\nprompt: {user: hi}\n"},
    ) == [f"blocks/p.yaml:2:7: error BY353 block 'p': {NO_ENUM}; it has 0 outputs"]


def test_an_unbounded_flow_under_the_yards_budget_is_reported_at_its_name(
    make_yard: MakeYard,
) -> None:
    # kills budgets.x_check_budgets__mutmut_38 (BY871 at line 1 column 1, not at the flow's name)
    config = CONFIG + "budget: {cost_usd: 2.5}\n"
    assert _found(
        _yard(make_yard, {"fan": FAN.replace("budget: {cost_usd: 2.5}\n", "")}, config)
    ) == [
        "flows/fan.yaml:1:7: warning BY871 flow 'fan' has no bound on its model calls: map 'each' runs block 'judge' "
        "once per item of 'inputs.topics', a list whose length is known only at run time; only the budget "
        "(cost_usd 2.5) stops such a run"
    ]


def test_an_approvals_timeout_back_to_an_earlier_step_is_reported_at_its_on_timeout(
    make_yard: MakeYard,
) -> None:
    # kills control.x__edges__mutmut_178 and _179 (now in _gate_edges: BY307 at the gate, or at the step)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - {id: g, approval: {timeout: 1h, on_timeout: a}}
        """,
    ) == [f"flows/f.yaml:4:49: error BY307 step 'g' goes back to 'a' (a -> g -> a) {CYCLE}"]


def test_a_required_approvals_timeout_back_is_reported_at_its_on_timeout(
    make_yard: MakeYard,
) -> None:
    # kills control.x__edges__mutmut_178 and _179 for require_approval (now in _gate_edges), and _gate_edges' _6
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - {id: g, uses: u, require_approval: {timeout: 1h, on_timeout: a}}
        """,
    ) == [f"flows/f.yaml:4:66: error BY307 step 'g' goes back to 'a' (a -> g -> a) {CYCLE}"]


def test_an_approvals_rejection_back_to_an_earlier_step_is_reported_at_its_on_reject(
    make_yard: MakeYard,
) -> None:
    # kills control.x__edges__mutmut_159 (now in _gate_edges: BY307 at the gate, not at its on_reject)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - {id: g, approval: {on_reject: a}}
        """,
    ) == [f"flows/f.yaml:4:35: error BY307 step 'g' goes back to 'a' (a -> g -> a) {CYCLE}"]


def test_a_routes_goto_back_to_an_earlier_step_is_reported_at_that_goto(
    make_yard: MakeYard,
) -> None:
    # kills control.x__edges__mutmut_17 and _22 (BY307 at the list of routes, or at the route, not at its goto)
    assert problems(
        make_yard,
        """
        flow: f
        inputs: {v: {type: string}}
        steps:
          - {id: a, uses: t}
          - id: r
            router:
              value: "{{ inputs.v }}"
              routes: [{equals: again, goto: a}]
              default: end
        """,
    ) == [f"flows/f.yaml:8:38: error BY307 step 'r' goes back to 'a' (a -> r -> a) {CYCLE}"]


def test_a_map_binding_an_unknown_input_is_reported_at_that_name_in_map_with(
    make_yard: MakeYard,
) -> None:
    # kills references.x__bindings__mutmut_42 and _45 (BY215 at the step, not at the name in map.with)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - id: fan
            map: {items: "[1, 2]", uses: t, with: {nope: 1}, collect: rows}
        """,
    ) == [
        "flows/f.yaml:4:44: error BY215 step 'fan' binds 'nope', which is not an input of block 't' (its "
        "inputs are 'x')"
    ]


def test_a_maps_items_and_bindings_are_checked_where_they_are_written(make_yard: MakeYard) -> None:
    # kills scope.x__places__mutmut_24 and _30 (the problems of map.items and map.with at `map:`, at the step)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - id: fan
            map: {items: "inputs.list", uses: t, with: {x: "{{ inputs.nothing }}"}, collect: rows}
        """,
    ) == [
        "flows/f.yaml:4:18: error BY402 step 'fan': unknown flow input 'inputs.list': flow 'f' has no input 'list' "
        "(it declares no inputs)",
        "flows/f.yaml:4:52: error BY402 step 'fan': unknown flow input 'inputs.nothing': flow 'f' has no input "
        "'nothing' (it declares no inputs)",
    ]


def test_a_duplicate_step_id_names_the_line_of_the_first_id_not_of_its_step(
    make_yard: MakeYard,
) -> None:
    # kills structure.x__identity__mutmut_33 and _35 (line 3, the first step's, instead of line 4, its id's)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - uses: t
            id: a
          - {id: a, uses: u}
        """,
    ) == [
        "flows/f.yaml:5:10: error BY302 step id 'a' is already used at line 4; step ids are unique in the "
        "whole flow, nested steps included"
    ]


# -- what a message says ------------------------------------------------------------------------------


def test_a_map_of_steps_over_a_run_time_list_names_its_steps_as_unbounded(
    make_yard: MakeYard,
) -> None:
    # kills budgets.xǁEstimateǁ_step__mutmut_70
    assert _found(_yard(make_yard, {"fan": FAN_OF_STEPS})) == [
        "flows/fan.yaml:4:1: warning BY871 flow 'fan' has no bound on its model calls: map 'each' runs its steps "
        "once per item of 'inputs.topics', a list whose length is known only at run time; only the budget "
        "(cost_usd 2.5) stops such a run"
    ]


def test_one_decide_value_without_a_branch_is_named_in_the_singular(make_yard: MakeYard) -> None:
    # kills routing.x__branches__mutmut_93 and _112
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: pick, uses: d, branches: {again: next}}
          - {id: next, uses: t}
        """,
    ) == [
        "flows/f.yaml:3:25: warning BY312 step 'pick': decide value 'done' of block 'd' has no branch and "
        "will continue with the next step 'next'"
    ]


def test_scheduled_runs_missing_two_required_inputs_name_them_in_the_plural(
    make_yard: MakeYard,
) -> None:
    # kills schedule.x_check_schedule__mutmut_91
    assert problems(
        make_yard,
        """
        flow: f
        inputs: {a: {type: string}, b: {type: string}, c: {type: string, default: x}}
        schedule: {cron: "@daily"}
        steps:
          - {id: s, uses: t}
        """,
    ) == [
        "flows/f.yaml:3:1: error BY509 schedule: scheduled runs get no value for the required inputs 'a', "
        "'b': set them in schedule.inputs"
    ]


def test_a_subflow_missing_one_required_input_names_it_in_the_singular(make_yard: MakeYard) -> None:
    # kills references.x__bindings__mutmut_76 and _96
    child = """
        flow: child
        inputs: {a: {type: string}, b: {type: string, default: x}}
        steps:
          - {id: c, uses: t}
        """
    assert problems(
        make_yard, "flow: f\nsteps:\n  - {id: s, flow: child}\n", **{"flows/child.yaml": child}
    ) == [
        "flows/f.yaml:3:19: error BY217 step 's' runs flow 'child' without its required input 'a': bind it in "
        "`with:`"
    ]


def test_a_subflow_whose_file_did_not_load_is_named_as_such(make_yard: MakeYard) -> None:
    # kills references.x__subflow__mutmut_17 (BY214 without a message)
    root = make_yard(
        {
            **BLOCKS,
            "flows/child.yaml": "flow: child\nsteps: nonsense\n",
            "flows/f.yaml": "flow: f\nsteps:\n  - {id: s, flow: child}\n",
        }
    )
    project = load_project(root)
    assert [d.code for d in project.diagnostics] == ["BY104"]
    assert [d.format() for d in check_project(project)] == [
        "flows/f.yaml:3:19: error BY214 step 's' runs flow 'child', which did not load: fix the problems reported "
        "in flows/child.yaml"
    ]


def test_keys_that_do_not_fit_the_action_say_what_to_write_instead(make_yard: MakeYard) -> None:
    # kills structure.x__keys__mutmut_20, _50 and _56 (the hints for a map and for an approval step)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - id: fan
            map: {items: "[1]", uses: t, collect: rows}
            with: {x: 1}
            outputs: {rows: all}
          - id: ok
            approval: {fields: {note: {type: string}}}
            outputs: {note: remark}
        """,
    ) == [
        "flows/f.yaml:5:5: error BY317 step 'fan': `with:` binds inputs of a block or subflow, and this step runs "
        "neither (a map takes its bindings in map.with)",
        "flows/f.yaml:6:5: error BY317 step 'fan': `outputs:` renames what a block or subflow writes, and this is a "
        "map step (name its result with `collect:`)",
        "flows/f.yaml:9:5: error BY317 step 'ok': `outputs:` renames what a block or subflow writes, and this is an "
        "approval step (name the fields as the context keys you want)",
    ]


def test_needing_a_step_that_branches_says_it_picks_its_successor_with_branches(
    make_yard: MakeYard,
) -> None:
    # kills structure.x__needs__mutmut_44
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: pick, uses: d, branches: {again: x, done: y}}
          - {id: x, uses: t, goto: end}
          - {id: y, uses: u, needs: [pick]}
        """,
    ) == [
        "flows/f.yaml:5:30: error BY309 step 'y' needs 'pick', which picks its successor with branches; "
        "route to 'y' from 'pick' instead"
    ]


def test_a_cycle_through_three_steps_is_shown_whole(make_yard: MakeYard) -> None:
    # kills paths.x__unbounded__mutmut_35 and _36 (the cycle shown by its two ends only: a -> c -> a)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - {id: b, uses: t}
          - {id: c, uses: d, branches: {again: a, done: end}}
        """,
    ) == [f"flows/f.yaml:5:40: error BY307 step 'c' goes back to 'a' (a -> b -> c -> a) {CYCLE}"]


def test_an_optional_subflow_output_is_one_its_step_may_write(make_yard: MakeYard) -> None:
    # kills dataflow.xǁDataflowǁoptional_writes__mutmut_3 (BY408 "never written": no step counted as writing it)
    child = """
        flow: child
        outputs: {n: {optional: true}}
        steps:
          - {id: c, uses: t, outputs: {y: n}}
        """
    assert problems(
        make_yard,
        "flow: f\noutputs: [n]\nsteps:\n  - {id: s, flow: child}\n",
        **{"flows/child.yaml": child},
    ) == [
        f"flows/f.yaml:2:11: warning BY409 flow output 'n' is not written on the path s → end (step 's' may write "
        f"it); {UNWRITTEN}"
    ]


# -- whether a problem is reported at all -------------------------------------------------------------


def test_an_unknown_name_model_is_reported(make_yard: MakeYard) -> None:
    # kills config.x_check_config__mutmut_42 (the profiles looked up in no project: AttributeError)
    root = make_yard(
        {
            **BLOCKS,
            "blockyard.yaml": "models: {fast: {provider: mock}}\nthreads: {name_model: fsat}\n",
            "flows/f.yaml": "flow: f\nsteps:\n  - {id: a, uses: t}\n",
        }
    )
    assert found(root) == [
        "blockyard.yaml:2:23: error BY502 threads.name_model: unknown model profile 'fsat' (did "
        "you mean 'fast'?) (profiles: default, fast)"
    ]


def test_a_tool_module_linking_out_of_the_code_folder_is_reported(
    make_yard: MakeYard, tmp_path: Path
) -> None:
    # kills config.x_check_config__mutmut_106 (the finding made without its message: TypeError)
    root = make_yard(
        {
            **BLOCKS,
            "blockyard.yaml": "paths: {code: tools}\ntools:\n  forecast: {import: 'weather:f'}\n",
            "flows/f.yaml": "flow: f\nsteps:\n  - {id: a, uses: t}\n",
        }
    )
    (tmp_path / "evil.py").write_text("def f(x: str) -> str:\n    return x\n", encoding="utf-8")
    (root / "tools").mkdir()
    (root / "tools" / "weather.py").symlink_to(tmp_path / "evil.py")
    assert found(root) == [
        "blockyard.yaml:3:22: error BY008 tool 'forecast': symbolic link tools/weather.py resolves "
        "outside the yard's code folder; it is not read"
    ]


def test_a_memory_step_after_a_step_without_a_block_is_checked(make_yard: MakeYard) -> None:
    # kills flows.x_check_memory__mutmut_3 (the check stopped at the first step that runs no block)
    recall = "block: recall\nkind: memory_read\nmemory: {namespace: history}\noutputs: {facts: {type: any}}\n"
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: gate, approval: {message: go?}}
          - {id: recall, uses: recall}
        """,
        **{"blocks/recall.yaml": recall},
    ) == [
        "flows/f.yaml:4:24: error BY357 step 'recall' uses memory_read block 'recall', but flow 'f' has no memory: "
        'add memory: {scope: "users/{{ inputs.user_id }}"} (or another scope)'
    ]


def test_a_foreach_collect_is_an_output_its_step_has(make_yard: MakeYard) -> None:
    # kills references.x_step_outputs__mutmut_24 (BY216: "step 'each' has no output 'rows'")
    flow = """
        flow: f
        outputs: [w]
        steps:
          - id: each
            foreach: {items: "[1, 2]", collect: rows, steps: [{id: body, uses: t}]}
          - {id: after, uses: need, with: {y: "{{ steps.each.outputs.rows }}"}}
        """
    assert problems(make_yard, flow) == []


def test_a_value_written_on_one_way_into_a_step_that_is_revisited_is_not_certain(
    make_yard: MakeYard,
) -> None:
    # kills dataflow.xǁDataflowǁ_forward__mutmut_28 (one pass: 'mid' judged before 'late', below it, leads to it)
    assert problems(
        make_yard,
        """
        flow: f
        steps:
          - {id: pick, uses: d, branches: {again: late, done: writer}}
          - {id: writer, uses: t}
          - {id: mid, uses: need, goto: end}
          - {id: late, uses: u, goto: mid}
        """,
    ) == [
        "flows/f.yaml:5:21: error BY405 step 'mid': input 'y' of block 'need' is not bound; context key 'y' is written "
        "by step 'writer', but not on every path to 'mid' (bind it with `with: {y: ...}`)"
    ]


def test_a_loops_until_sees_the_steps_its_parallel_arms_both_finish(make_yard: MakeYard) -> None:
    # kills dataflow.xǁDataflowǁat_body_end__mutmut_7 (the forward analysis alone meets the two arms: BY403)
    flow = """
        flow: f
        steps:
          - id: lp
            loop:
              max_iterations: 3
              until: "steps.b.outputs.y and steps.c.outputs.z"
              steps:
                - {id: a, uses: t, outputs: {y: first}}
                - {id: b, uses: t, needs: [a]}
                - {id: c, uses: u, needs: [a]}
        """
    assert problems(make_yard, flow) == []


def test_a_loop_body_that_never_ends_is_reported_and_its_until_checked(make_yard: MakeYard) -> None:
    # kills dataflow.x__either__mutmut_1 (no facts at the end of a body that never ends: the union failed)
    assert problems(
        make_yard,
        """
        flow: f
        inputs: {stop: {type: boolean}}
        steps:
          - id: lp
            loop:
              max_iterations: 3
              until: "inputs.stop and inputs.nope"
              steps:
                - {id: x, uses: t, goto: x}
        """,
    ) == [
        "flows/f.yaml:7:14: error BY402 step 'lp': unknown flow input 'inputs.nope': flow 'f' has no input 'nope' "
        "(its inputs are 'stop')",
        "flows/f.yaml:9:16: error BY306 step 'x' repeats itself with no way out: no path from 'x' reaches the end of "
        "the loop body of step 'lp' (give the cycle an exit, e.g. a router default or on_max_visits: end)",
        "flows/f.yaml:9:34: error BY307 step 'x' goes back to 'x' (x -> x) and no step on this cycle has max_visits, "
        "so it could run forever: add max_visits: N (and on_max_visits) to 'x', or use a loop: with max_iterations",
    ]


def test_the_path_that_misses_an_output_is_found_past_a_step_with_no_way_on(
    make_yard: MakeYard,
) -> None:
    # kills bindings.x_unwritten_path__mutmut_16 ('dead' has no edge out: the search failed on it)
    dead = "block: dn\nkind: decide\noutputs: {c: {type: string}}\nprompt: {user: x}\n"
    lines = problems(
        make_yard,
        """
        flow: f
        inputs: {v: {type: string}}
        outputs: [y]
        steps:
          - id: r
            router:
              value: "{{ inputs.v }}"
              routes: [{equals: a, goto: dead}, {equals: b, goto: w}]
              default: skip
          - {id: dead, uses: dn, branches: {}}
          - {id: w, uses: t, goto: end}
          - {id: skip, uses: u}
        """,
        **{"blocks/dn.yaml": dead},
    )
    # the block's own finding, the path, and 'dead' as a dead end
    assert [line.split(" ")[2] for line in lines] == ["BY353", "BY409", "BY306"]
    assert lines[1] == (
        f"flows/f.yaml:3:11: warning BY409 flow output 'y' is not written on the path r (default route) → skip → "
        f"end (step 'w' writes it); {UNWRITTEN}"
    )
    # no cycle here: 'dead' names no step after it, and the message says so
    assert lines[2].endswith(
        "error BY306 step 'dead' leads to no other step: no path from 'dead' reaches the end of the flow "
        "(give it a goto, or a branch for each value it can choose)"
    )


def test_a_rejection_that_fails_the_run_leads_to_no_step_even_one_called_fail(
    make_yard: MakeYard,
) -> None:
    # kills control.x__edges__mutmut_141 (now x__gate_edges__mutmut_15: 'f' warned of 6 calls, through 'fail')
    child = """
        flow: child
        steps:
          - {id: g, approval: {on_reject: fail}, goto: end}
          - {id: fail, uses: judge, with: {text: x}}
        """
    parent = "flow: f\nbudget: {model_calls: 1}\nsteps:\n  - {id: s, flow: child}\n"
    assert found(_yard(make_yard, {"child": child, "f": parent})) == [
        "flows/child.yaml:4:10: error BY303 step id 'fail' is reserved (`fail` ends the run with an error); choose "
        "another id"
    ]


def test_a_flows_closure_checks_its_blocks_by_name_and_by_file_and_no_other(
    make_yard: MakeYard,
) -> None:
    # kills x_check_closure__mutmut_4 and _7, x__check_all__mutmut_6 and _8 (engine/validate/semantic/__init__.py)
    root = make_yard(
        {
            **BLOCKS,
            "blocks/other.yaml": "block: p\nkind: decide\noutputs: {c: {type: string}}\nprompt: {user: hi}\n",
            "blocks/greet.yaml": "block: hello\nkind: decide\nprompt: {user: hi}\n",
            "blocks/stray.yaml": "block: stray\nkind: decide\nprompt: {user: hi}\n",
            "flows/f.yaml": "flow: f\nsteps:\n  - {id: a, uses: p, branches: {x: b}}\n"
            "  - {id: b, uses: greet}\n",
        }
    )
    project = load_project(root)
    assert [d.format() for d in project.diagnostics] == []
    closure = [d.format() for d in check_closure(project, "f")]
    # 'greet' by the name of its file (its block is 'hello'), 'p' by its name (its file is other.yaml)
    assert closure == [
        f"blocks/greet.yaml:2:7: error BY353 block 'hello': {NO_ENUM}; it has 0 outputs",
        f"blocks/other.yaml:3:1: error BY353 block 'p': {NO_ENUM}; output 'c' has no enum",
        "flows/f.yaml:4:19: error BY210 step 'b' uses unknown block 'greet': blocks/greet.yaml defines block "
        "'hello' (a step names a block by its `block:` id; use 'hello', or rename it)",
    ]
    assert sorted(set(d.format() for d in check_project(project)) - set(closure)) == [
        f"blocks/stray.yaml:2:7: error BY353 block 'stray': {NO_ENUM}; it has 0 outputs"
    ]
