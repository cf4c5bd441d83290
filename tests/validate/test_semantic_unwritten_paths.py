"""A required flow output that some path to the end does not write is reported with that path, naming the
choice each step made on it — the route by its number or as the default, a gate rejected or timed out
(engine/validate/semantic/bindings.py, BY409) — and a gate whose rejection fails the run adds no path."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.definitions.project import load_project
from engine.validate.semantic import check_project

BLOCKS = {
    "blockyard.yaml": "models: {default: {provider: mock}}\n",
    "blocks/inc.yaml": """
        block: inc
        kind: transform
        inputs: {n: {type: integer, default: 0}}
        outputs: {n: {type: integer}}
        compute: {n: n + 1}
        """,
    "blocks/pick.yaml": """
        block: pick
        kind: decide
        outputs: {c: {type: string, enum: [a, b]}}
        prompt: {user: Which?}
        """,
}
TAIL = "runs that end that way fail (declare it `{optional: true}` or give it a `default:` if that is expected)"


def problems(
    make_yard: Callable[[dict[str, str]], Path], flow: str
) -> list[tuple[str, int, int, str]]:
    files = {
        name: textwrap.dedent(text).lstrip()
        for name, text in {**BLOCKS, "flows/f.yaml": flow}.items()
    }
    project = load_project(make_yard(files))
    return [
        (d.code, d.line, d.col, d.message) for d in [*project.diagnostics, *check_project(project)]
    ]


@pytest.mark.parametrize(
    ("flow", "path"),
    [
        pytest.param(
            """
        flow: f
        outputs: [n]
        steps:
          - id: r
            router:
              value: "x"
              routes: [{equals: a, goto: w}, {equals: b, goto: skip}]
              default: w
          - {id: w, uses: inc, goto: end}
          - {id: skip, uses: pick}
        """,
            "r (route 2) → skip → end",
            id="a route by its number",
        ),
        pytest.param(
            """
        flow: f
        outputs: [n]
        steps:
          - id: r
            router:
              value: "x"
              routes: [{equals: a, goto: w}]
              default: skip
          - {id: w, uses: inc, goto: end}
          - {id: skip, uses: pick}
        """,
            "r (default route) → skip → end",
            id="the default route",
        ),
        pytest.param(
            """
        flow: f
        outputs: [n]
        steps:
          - {id: s, uses: pick, require_approval: {message: ok?, timeout: 1h, on_timeout: end, on_reject: w}}
          - {id: w, uses: inc}
        """,
            "s (timed out) → end",
            id="a gate timed out",
        ),
        pytest.param(
            """
        flow: f
        outputs: [n]
        steps:
          - {id: s, uses: pick, require_approval: {message: ok?, on_reject: end}}
          - {id: w, uses: inc}
        """,
            "s (rejected) → end",
            id="a gate rejected",
        ),
    ],
)
def test_the_path_that_misses_an_output_names_each_choice_on_it(
    make_yard: Callable[[dict[str, str]], Path], flow: str, path: str
) -> None:
    assert problems(make_yard, flow) == [
        (
            "BY409",
            2,
            11,
            f"flow output 'n' is not written on the path {path} (step 'w' writes it); {TAIL}",
        )
    ]


def test_a_gate_whose_rejection_fails_the_run_leaves_no_path_to_the_end(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    assert (
        problems(
            make_yard,
            """
        flow: f
        outputs: [n]
        steps:
          - {id: s, uses: pick, require_approval: {message: ok?, on_reject: fail}}
          - {id: w, uses: inc}
        """,
        )
        == []
    )
