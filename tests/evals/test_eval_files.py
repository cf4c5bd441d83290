"""Eval files (evals/*.yaml) and their datasets as `blockyard validate` reads them: every problem at its
file:line:col with its code, datasets of each format read into cases, and `blockyard eval` refusing a
yard whose eval files are broken with the same lines (docs/evals.md, docs/validation.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.definitions.project import load_project
from engine.validate.evalfiles import load_evals, typed_inputs
from tests.support.cli import Cli

Maker = Callable[[dict[str, str]], Path]

CONFIG = "models:\n  default: {provider: mock}\n  judge: {provider: mock}\n"
GREET = """\
block: greet
version: 2
kind: llm
inputs:
  name: {type: string}
  times: {type: integer, default: 1}
outputs:
  greeting: {type: string}
prompt: {user: "Greet {{ name }}."}
"""
HELLO = """\
flow: hello
inputs:
  name: {type: string}
  times: {type: integer, default: 1}
outputs: [greeting]
steps:
  - {id: greet, uses: greet, with: {name: "{{ inputs.name }}"}}
"""
YARD = {"blockyard.yaml": CONFIG, "blocks/greet.yaml": GREET, "flows/hello.yaml": HELLO}

BROKEN = """\
eval: broken
flow: helo
assert:
  - {name: nothing}
  - {}
  - {contains: a, regex: b}
  - {regex: "a(b"}
  - {expr: "outputs.greeting =="}
  - {expr: "outptus.greeting == 1"}
  - {json_schema: {type: 12}}
  - judge: {rubric: friendly?, model: juge}
cases: [{}]
"""

BAD_CASES = """\
eval: cases
flow: hello
dataset: data/rows.jsonl
assert:
  - {contains: Ada, output: greting}
cases:
  - {name: one, inputs: {nam: Ada}}
  - {name: one, inputs: {name: Bo, times: many}}
  - name: chat
    inputs: {name: Cy}
    history: [hi there]
"""


def test_every_problem_of_an_eval_file_is_reported_at_its_line_and_column(
    cli: Cli, make_yard: Maker
) -> None:
    root = make_yard(
        {
            **YARD,
            "evals/broken.yaml": BROKEN,
            "evals/cases.yaml": BAD_CASES,
            "evals/data/rows.jsonl": '{"inputs": {"name": "Di"}}\n{"inputs": {}, "oops": 1}\nnot json\n',
            "evals/twice.yaml": "eval: cases\nblock: greet\ncases: [{inputs: {name: x}}]\n",
            "evals/neither.yaml": "eval: neither\ncases: [{inputs: {}}]\n",
            "evals/both.yaml": "eval: both\nflow: hello\nblock: greet\ncases: [{inputs: {name: x}}]\n",
            "evals/empty.yaml": "eval: empty\nblock: greet@2\n",
            "evals/versions.yaml": "eval: versions\nblock: greet@7\ncases: [{inputs: {name: x}}]\n",
            "evals/unknown.yaml": "eval: unknown\nblock: gret\ncases: [{inputs: {name: x}}]\n",
            "evals/nodata.yaml": "eval: nodata\nflow: hello\ndataset: data/missing.csv\n",
            "evals/format.yaml": "eval: format\nflow: hello\ndataset: data/rows.txt\n",
            "evals/data/notes.yaml": "- {inputs: {name: Ed}}\n- inputs: {nme: Flo}\n",
        }
    )
    done = cli(root, "validate")
    assert done.code == 1
    assert done.out.splitlines() == [
        "evals/both.yaml:3:8: error BY881 eval 'both' names both a flow and a block: give exactly one of `flow:` and "
        "`block:`",
        "evals/broken.yaml:2:7: error BY214 eval 'broken' evaluates unknown flow 'helo' (did you mean 'hello'?)",
        "evals/broken.yaml:4:5: error BY880 an assertion has exactly one kind (equals, contains, regex, json_schema, "
        "expr, judge, max_cost_usd, max_tokens, max_latency); this one has none",
        "evals/broken.yaml:5:5: error BY880 an assertion has exactly one kind (equals, contains, regex, json_schema, "
        "expr, judge, max_cost_usd, max_tokens, max_latency); this one has none",
        "evals/broken.yaml:6:5: error BY880 an assertion has exactly one kind (equals, contains, regex, json_schema, "
        "expr, judge, max_cost_usd, max_tokens, max_latency); this one has contains, regex",
        "evals/broken.yaml:7:13: error BY313 regex 'a(b' does not compile: missing ): a(b",
        "evals/broken.yaml:8:12: error BY400 expr 'outputs.greeting ==': expression syntax error: unexpected "
        "'end of print statement'",
        "evals/broken.yaml:9:12: error BY401 expr 'outptus.greeting == 1' reads 'outptus' (did you mean 'outputs'?); "
        "an eval's expression sees outputs, inputs, expected, usage",
        "evals/broken.yaml:10:19: error BY888 not a valid JSON Schema: 12 is not valid under any of the given "
        "schemas (at type)",
        "evals/broken.yaml:11:39: error BY502 judge: unknown model profile 'juge' (did you mean 'judge'?) "
        "(profiles: default, judge)",
        "evals/cases.yaml:5:29: error BY887 assertion about output 'greting', which the flow does not have (did you "
        "mean 'greeting'?) (its outputs: greeting)",
        "evals/cases.yaml:7:25: error BY886 case 'one': unknown input 'nam' (did you mean 'name'?); its inputs are "
        "name, times; missing input 'name' (string)",
        "evals/cases.yaml:8:12: error BY889 eval 'cases': case 'one' is also written at evals/cases.yaml:7:5; a "
        "case's name must be unique (reports compare cases by name)",
        "evals/cases.yaml:8:25: error BY886 case 'one': input 'times' must be an integer, got string 'many'",
        "evals/cases.yaml:11:15: error BY886 case 'chat', history turn 1: unknown input 'message'; its inputs are "
        "name, times; missing input 'name' (string)",
        "evals/data/rows.jsonl:2:1: error BY885 unknown key 'oops' in a case (its keys: name, inputs, history, "
        "expected, assert)",
        "evals/data/rows.jsonl:3:1: error BY885 not a JSON value: Expecting value: line 1 column 1 (char 0)",
        "evals/empty.yaml:1:7: error BY882 eval 'empty' has no cases: add `cases:` or a `dataset:`",
        "evals/format.yaml:3:10: error BY884 dataset 'data/rows.txt': unknown format; use a .jsonl, .csv, .yaml, .yml "
        "or .json file",
        "evals/neither.yaml:1:7: error BY881 eval 'neither' names no flow: give exactly one of `flow:` and `block:`",
        "evals/nodata.yaml:3:10: error BY884 dataset 'data/missing.csv': no such file (evals/data/missing.csv)",
        "evals/twice.yaml:1:7: error BY883 eval 'cases' is also defined in evals/cases.yaml",
        "evals/unknown.yaml:2:8: error BY210 eval 'unknown' evaluates unknown block 'gret' (did you mean 'greet'?)",
        "evals/versions.yaml:2:8: error BY211 eval 'versions' evaluates block 'greet' version 7, which does not exist "
        "(versions: 2)",
    ]
    # evals/data/notes.yaml: no eval reads it
    assert done.err == "24 errors in 11 files (14 checked)\n"


def test_a_schema_error_in_an_eval_file_has_its_place_and_a_suggestion(
    cli: Cli, make_yard: Maker
) -> None:
    root = make_yard(
        {
            **YARD,
            "evals/typo.yaml": "eval: typo\nflow: hello\ncasses: []\nthresholds: {pass_rate: 2}\n",
            "evals/kind.yaml": "eval: kind\nflow: hello\nassert: [{contans: Ada}]\ncases: [{}]\n",
        }
    )
    done = cli(root, "validate", str(root / "evals" / "typo.yaml"))
    assert done.out.splitlines() == [
        "evals/typo.yaml:3:1: error BY102 unknown key 'casses' (did you mean 'cases'?)",
        "evals/typo.yaml:4:25: error BY107 'thresholds.pass_rate' is 2; it must be at most 1",
    ]
    assert cli(root, "validate", str(root / "evals" / "kind.yaml")).out == (
        "evals/kind.yaml:3:11: error BY102 unknown key 'contans' in 'assert[0]' (did you mean 'contains'?)\n"
    )


def test_blockyard_eval_refuses_broken_eval_files_with_the_same_lines(
    cli: Cli, make_yard: Maker
) -> None:
    root = make_yard(
        {**YARD, "evals/x.yaml": "eval: x\nflow: hello\ncases: [{inputs: {nam: Ada}}]\n"}
    )
    done = cli(root, "eval")
    assert (done.code, done.out) == (1, "")
    assert done.err == (
        "evals/x.yaml:3:18: error BY886 case 'case 1': unknown input 'nam' (did you mean 'name'?); "
        "its inputs are name, times; missing input 'name' (string)\n"
    )


def test_datasets_of_each_format_become_cases_named_by_their_place(make_yard: Maker) -> None:
    root = make_yard(
        {
            **YARD,
            "evals/a.yaml": "eval: a\nflow: hello\ndataset: data/rows.jsonl\ncases: [{inputs: {name: Inline}}]\n",
            "evals/b.yaml": "eval: b\nflow: hello\ndataset: data/rows.csv\n",
            "evals/c.yaml": "eval: c\nflow: hello\ndataset: data/rows.yaml\n",
            "evals/d.yaml": "eval: d\nblock: greet\ndataset: data/rows.json\n",
            "evals/data/rows.jsonl": '{"inputs": {"name": "Ada"}, "expected": "Hi Ada"}\n\n'
            '{"name": "bo", "inputs": {"name": "Bo"}, "assert": [{"contains": "Bo"}]}\n',
            "evals/data/rows.csv": 'name,times,expected\n007,3,Hi\n"Smith, J",1,"Hello, J"\n',
            "evals/data/rows.yaml": "- inputs: {name: Cy}\n  history: [hello]\n- {name: dee, inputs: {name: Dee}}\n",
            "evals/data/rows.json": '[{"inputs": {"name": "Eve"}}]',
        }
    )
    project = load_project(root)
    files = load_evals(project)
    assert files.diagnostics == []
    cases = {
        name: [
            (case.name, case.case.inputs, case.case.expected, case.spot.where)
            for case in loaded.cases
        ]
        for name, loaded in files.evals.items()
    }
    assert cases == {
        "a": [
            ("evals/data/rows.jsonl:1", {"name": "Ada"}, "Hi Ada", "evals/data/rows.jsonl:1:1"),
            ("bo", {"name": "Bo"}, None, "evals/data/rows.jsonl:3:1"),
            ("case 1", {"name": "Inline"}, None, "evals/a.yaml:4:9"),
        ],
        "b": [
            (
                "evals/data/rows.csv:2",
                {"name": "007", "times": "3"},
                "Hi",
                "evals/data/rows.csv:2:1",
            ),
            (
                "evals/data/rows.csv:3",
                {"name": "Smith, J", "times": "1"},
                "Hello, J",
                "evals/data/rows.csv:3:1",
            ),
        ],
        "c": [
            ("evals/data/rows.yaml:1", {"name": "Cy"}, None, "evals/data/rows.yaml:1:3"),
            ("dee", {"name": "Dee"}, None, "evals/data/rows.yaml:3:3"),
        ],
        "d": [("evals/data/rows.json:1", {"name": "Eve"}, None, "evals/data/rows.json:1:2")],
    }
    assert files.evals["c"].cases[0].case.history == ["hello"]
    # a CSV row's text is read as the flow declares it: a string keeps its zeros, an integer is a number
    flow = project.flows["hello"].spec
    assert typed_inputs(files.evals["b"].cases[0], flow.inputs) == {"name": "007", "times": 3}


def test_only_the_files_directly_in_evals_are_eval_files(cli: Cli, make_yard: Maker) -> None:
    root = make_yard(
        {
            **YARD,
            "evals/ok.yaml": "eval: ok\nflow: hello\ndataset: data/rows.yaml\n",
            "evals/data/rows.yaml": "- inputs: {name: Ada}\n",
        }
    )
    done = cli(root, "validate")
    assert (done.code, done.out, done.err) == (
        0,
        "",
        "no problems in 5 files\n",
    )  # the dataset is read and counted
