"""A template expression over the limits whatever blockyard.yaml sets fails every run: `blockyard validate`
says so at its place, naming what is too big and the limit it passes (BY411, engine/templates/render.py
`constant_problem`) — sized before anything is computed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.definitions.project import load_project
from engine.validate.semantic import check_project

INC = "block: inc\nkind: transform\ninputs: {n: {type: any, default: 0}}\noutputs: {n: {type: any}}\ncompute: {n: n}\n"


def test_an_expression_over_every_limit_is_refused_at_its_place(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    expressions = {
        "a": ("2 ** (10 ** 9)", "power", "template_max_int_bits"),
        "b": ("'a' * (10 ** 12)", "repeated string", "template_max_string"),
        "c": ("[1] * (10 ** 12)", "repeated list", "template_max_items"),
    }
    steps = "".join(
        f'  - {{id: {step}, uses: inc, with: {{n: "{{{{ {source} }}}}"}}}}\n'
        for step, (source, _, _) in expressions.items()
    )
    fine = (
        '  - {id: fine, uses: inc, with: {n: "{{ 2 ** 62 }}"}}\n'  # within every limit: no problem
    )
    root = make_yard(
        {
            "blockyard.yaml": "models: {default: {provider: mock}}\n",
            "blocks/inc.yaml": INC,
            "flows/f.yaml": f"flow: f\nsteps:\n{steps}{fine}",
        }
    )
    project = load_project(root)
    found = [
        (d.code, d.line, d.col, d.message) for d in [*project.diagnostics, *check_project(project)]
    ]
    assert found == [
        (
            "BY411",
            line,
            34,
            f"step '{step}': this expression always fails: its {what} is larger than "
            f"any limits.{setting} allows",
        )
        for line, (step, (_, what, setting)) in enumerate(expressions.items(), start=3)
    ]
