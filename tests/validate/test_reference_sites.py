"""Every place a definition names a block, a flow or a step, with a name that resolves to nothing:
each is refused by the validator with its own code, at the line and column of the name
(docs/flows.md, "Steps" and "How steps follow each other"; the codes' table there).

One table, one unknown name per case, so that a site the validator stops checking (say `map.uses`,
which then validates with "no problems" and fails only at run time) fails its own row."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.definitions.project import load_project
from engine.validate.semantic import check_project
from tests.support.cli import Cli

MakeYard = Callable[[dict[str, str]], Path]

BLOCKS = {
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
    "blocks/helper.yaml": """
        block: helper
        kind: agent
        inputs: {task: {type: string, default: ''}}
        outputs: {answer: {type: string}}
        prompt: {user: '{{ task }}'}
        """,
}
CHILD = """
    flow: child
    outputs: [n]
    steps:
      - {id: c, uses: inc}
    """
LEAD = """
    block: lead
    kind: agent
    outputs: {answer: {type: string}}
    prompt: {user: hi}
    delegates: [nobody]
    """

F, LEAD_FILE = "flows/f.yaml", "blocks/lead.yaml"
NAME = "nobody"  # the unknown name of every case: a block, a flow or a step that does not exist

# (site, the flow, the code its unknown name gets); every case names NAME exactly once
SITES: list[tuple[str, str, str]] = [
    (
        "uses",
        """
        flow: f
        steps:
          - {id: s, uses: nobody}
        """,
        "BY210",
    ),
    (
        "uses with a version",
        """
        flow: f
        steps:
          - {id: s, uses: nobody@2}
        """,
        "BY210",
    ),
    (
        "map.uses",
        """
        flow: f
        steps:
          - id: s
            map: {items: '[1, 2]', uses: nobody, collect: out}
        """,
        "BY210",
    ),
    (
        "uses in a loop body",
        """
        flow: f
        steps:
          - id: s
            loop:
              max_iterations: 2
              steps:
                - {id: t, uses: nobody}
        """,
        "BY210",
    ),
    (
        "uses in a foreach body",
        """
        flow: f
        steps:
          - id: s
            foreach:
              items: '[1, 2]'
              steps:
                - {id: t, uses: nobody}
        """,
        "BY210",
    ),
    (
        "uses in a map body",
        """
        flow: f
        steps:
          - id: s
            map:
              items: '[1, 2]'
              collect: out
              steps:
                - {id: t, uses: nobody}
        """,
        "BY210",
    ),
    (
        "map.uses in a loop body",
        """
        flow: f
        steps:
          - id: s
            loop:
              max_iterations: 2
              steps:
                - id: t
                  map: {items: '[1]', uses: nobody, collect: out}
        """,
        "BY210",
    ),
    (
        "flow (a subflow)",
        """
        flow: f
        steps:
          - {id: s, flow: nobody}
        """,
        "BY214",
    ),
    (
        "flow in a foreach body",
        """
        flow: f
        steps:
          - id: s
            foreach:
              items: '[1]'
              steps:
                - {id: t, flow: nobody}
        """,
        "BY214",
    ),
    (
        "flow in a map body",
        """
        flow: f
        steps:
          - id: s
            map:
              items: '[1]'
              collect: out
              steps:
                - {id: t, flow: nobody}
        """,
        "BY214",
    ),
    (
        "delegates of an agent step",
        """
        flow: f
        steps:
          - {id: s, uses: helper, delegates: [nobody]}
        """,
        "BY218",
    ),
    (
        "needs",
        """
        flow: f
        steps:
          - {id: a, uses: inc}
          - {id: s, uses: inc, needs: [a, nobody]}
        """,
        "BY212",
    ),
    (
        "goto",
        """
        flow: f
        steps:
          - {id: s, uses: inc, goto: nobody}
        """,
        "BY212",
    ),
    (
        "goto in a loop body",
        """
        flow: f
        steps:
          - id: s
            loop:
              max_iterations: 2
              steps:
                - {id: t, uses: inc, goto: nobody}
        """,
        "BY212",
    ),
    (
        "branches",
        """
        flow: f
        steps:
          - {id: s, uses: pick, branches: {a: end, b: nobody}}
        """,
        "BY212",
    ),
    (
        "a router's route",
        """
        flow: f
        steps:
          - id: s
            router:
              value: x
              routes:
                - {equals: x, goto: end}
                - {contains: y, goto: nobody}
              default: end
        """,
        "BY212",
    ),
    (
        "a router's default",
        """
        flow: f
        steps:
          - id: s
            router:
              value: x
              routes: [{equals: x, goto: end}]
              default: nobody
        """,
        "BY212",
    ),
    (
        "an approval's on_reject",
        """
        flow: f
        steps:
          - {id: s, approval: {message: ok?, on_reject: nobody}}
        """,
        "BY212",
    ),
    (
        "an approval's on_timeout",
        """
        flow: f
        steps:
          - {id: s, approval: {message: ok?, timeout: 1h, on_timeout: nobody}}
        """,
        "BY212",
    ),
    (
        "require_approval's on_reject",
        """
        flow: f
        steps:
          - {id: s, uses: inc, require_approval: {message: ok?, on_reject: nobody}}
        """,
        "BY212",
    ),
    (
        "require_approval's on_timeout",
        """
        flow: f
        steps:
          - {id: s, uses: inc, require_approval: {message: ok?, timeout: 1h, on_timeout: nobody}}
        """,
        "BY212",
    ),
    (
        "on_max_visits",
        """
        flow: f
        steps:
          - {id: s, uses: inc, max_visits: 2, on_max_visits: nobody}
        """,
        "BY212",
    ),
]


def errors(
    make_yard: MakeYard, flow: str, **more: str
) -> tuple[list[tuple[str, int, int, str, str]], Path]:
    """(file, line, column, code, message) of every error the validator reports: loading, schema, semantic."""
    root = make_yard({**BLOCKS, "flows/child.yaml": CHILD, F: flow, **more})
    project = load_project(root)
    found = [*project.diagnostics, *check_project(project)]
    return [
        (d.file, d.line, d.col, d.code, d.message) for d in found if d.severity == "error"
    ], root


def where(root: Path, file: str) -> tuple[int, int]:
    """The line and column of the one unknown name in `file`."""
    lines = (root / file).read_text(encoding="utf-8").splitlines()
    places = [
        (number, line.index(NAME) + 1) for number, line in enumerate(lines, 1) if NAME in line
    ]
    assert len(places) == 1 and lines[places[0][0] - 1].count(NAME) == 1, places
    return places[0]


@pytest.mark.parametrize(
    ("flow", "code"), [pytest.param(flow, code, id=site) for site, flow, code in SITES]
)
def test_an_unknown_name_is_refused_at_its_site(make_yard: MakeYard, flow: str, code: str) -> None:
    found, root = errors(make_yard, flow)
    line, col = where(root, F)
    assert [(file, at_line, at_col, at_code) for file, at_line, at_col, at_code, _ in found] == [
        (F, line, col, code)
    ]
    assert f"'{NAME}'" in found[0][4]  # the message names it


@pytest.mark.parametrize(
    "flow",
    [
        pytest.param(
            """
        flow: f
        steps:
          - {id: a, uses: inc}
          - {id: s, uses: inc, with: {n: "{{ steps.nobody.outputs.n }}"}}
        """,
            id="with",
        ),
        pytest.param(
            """
        flow: f
        steps:
          - {id: a, uses: inc}
          - id: s
            router: {value: "{{ steps.nobody.outputs.n }}", routes: [{equals: x, goto: end}], default: end}
        """,
            id="a router's value",
        ),
    ],
)
def test_an_unknown_step_named_in_a_template_is_refused_at_the_template(
    make_yard: MakeYard, flow: str
) -> None:
    """`steps.<id>` in a template: BY403, at the start of the template's text (its quote)."""
    found, root = errors(make_yard, flow)
    line, _ = where(root, F)
    col = (root / F).read_text(encoding="utf-8").splitlines()[line - 1].index('"{{') + 1
    assert [
        (file, at_line, at_col, code, message) for file, at_line, at_col, code, message in found
    ] == [(F, line, col, "BY403", f"step 's': unknown step 'steps.{NAME}'")]


def test_an_unknown_delegate_of_an_agent_block_is_refused_at_its_site(make_yard: MakeYard) -> None:
    found, root = errors(
        make_yard, "flow: f\nsteps:\n  - {id: s, uses: lead}\n", **{LEAD_FILE: LEAD}
    )
    line, col = where(root, LEAD_FILE)
    assert [(file, at_line, at_col, at_code) for file, at_line, at_col, at_code, _ in found] == [
        (LEAD_FILE, line, col, "BY218")
    ]
    assert f"'{NAME}'" in found[0][4]


def test_an_unknown_version_of_a_known_block_is_refused_at_its_site(make_yard: MakeYard) -> None:
    found, root = errors(make_yard, "flow: f\nsteps:\n  - {id: s, uses: inc@7}\n")
    text = (root / F).read_text(encoding="utf-8").splitlines()
    assert [(file, line, col, code) for file, line, col, code, _ in found] == [
        (F, 3, text[2].index("inc@7") + 1, "BY211")
    ]
    assert found[0][4] == "step 's' uses block 'inc' version 7, which does not exist (versions: 1)"


def test_the_cli_refuses_an_unknown_block_of_a_map(make_yard: MakeYard, cli: Cli) -> None:
    """`blockyard validate` itself: an unknown `map.uses` is an error, never "no problems"."""
    flow = dict((site, text) for site, text, _ in SITES)["map.uses"]
    root = make_yard({**BLOCKS, "flows/child.yaml": CHILD, F: flow})
    outcome = cli(root, "validate")
    line, col = where(root, F)
    assert outcome.code != 0
    assert (
        f"{F}:{line}:{col}: error BY210 step 's' uses unknown block '{NAME}'"
        in outcome.out + outcome.err
    )
    assert "no problems" not in outcome.out + outcome.err


def test_every_site_of_the_table_is_valid_with_a_known_name(make_yard: MakeYard) -> None:
    """The table's flows are right but for the name: with names that exist they validate clean
    (so each case above fails for its name alone)."""
    known = {"BY210": "inc", "BY214": "child", "BY218": "child", "BY212": "end"}
    for site, flow, code in SITES:
        name = known[code]
        if site == "needs":
            name = "a2"
            flow = flow.replace("  - {id: s,", "  - {id: a2, uses: inc}\n          - {id: s,")
        if site == "uses with a version":
            flow = flow.replace("nobody@2", "nobody@1")
        if site == "on_max_visits":
            flow = flow.replace("on_max_visits: nobody", "on_max_visits: nobody, goto: s")
        fixed = textwrap.dedent(flow).replace(NAME, name)
        found, _ = errors(make_yard, fixed)
        assert found == [], (site, fixed, found)
