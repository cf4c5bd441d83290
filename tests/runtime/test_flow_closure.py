"""A flow is judged by its own closure: its file, the blocks, subflows and delegated flows it
reaches, and blockyard.yaml. Broken files elsewhere do not stop `run`, `graph`, `test` or the
Python API; the broken flow itself is refused with its diagnostics, printed once."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import Yard
from engine.cli import main
from engine.core.diagnostics import Diagnostic
from engine.core.errors import ValidationFailed
from engine.definitions.closure import closure, flow_problems
from engine.definitions.project import FlowDef, Project, load_project
from engine.validate import semantic

Run = Callable[..., tuple[int, str, str]]
YardMaker = Callable[[dict[str, str]], Path]

UPPER = """\
block: upper
kind: transform
inputs: {text: {type: string}}
outputs: {loud: {type: string}}
compute: {loud: "text | upper"}
"""
SHOUT = """\
flow: shout
inputs: {text: {type: string}}
outputs: [loud]
steps:
  - {id: up, uses: upper}
"""
PARENT = """\
flow: parent
inputs: {text: {type: string}}
outputs: [loud]
steps:
  - {id: call, flow: shout, with: {text: "{{ inputs.text }}"}}
"""
BROKEN_HELLO = """\
flow: hello
steps:
  - {id: greet, uses: greeet}
"""
BROKEN_TRIAGE = "flow: triage_ticket\nsteps: 5\n"
HELLO_LINE = "flows/hello.yaml:3:23: error BY210 step 'greet' uses unknown block 'greeet'"
TRIAGE_LINE = "flows/triage_ticket.yaml:2:8: error BY104 'steps' must be a list, not the number 5"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def yard(make_yard: YardMaker) -> Path:
    return make_yard(
        {
            "blocks/upper.yaml": UPPER,
            "flows/shout.yaml": SHOUT,
            "flows/parent.yaml": PARENT,
            "flows/hello.yaml": BROKEN_HELLO,
            "flows/triage_ticket.yaml": BROKEN_TRIAGE,
        }
    )


def test_run_a_healthy_flow_while_others_are_broken(cli: Run, yard: Path) -> None:
    code, out, err = cli("run", "parent", "--input", "text=hi", "--root", str(yard))
    assert code == 0, err
    assert out == "loud: HI\n"


def test_run_a_broken_flow_prints_its_diagnostics_once(cli: Run, yard: Path) -> None:
    code, out, err = cli("run", "hello", "--root", str(yard))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        HELLO_LINE
    ]  # once, no "error: ... error" prefix, nothing of triage_ticket


def test_a_flow_whose_file_does_not_load_is_not_called_unknown(cli: Run, yard: Path) -> None:
    code, _, err = cli("run", "triage_ticket", "--root", str(yard))
    assert (code, err) == (1, TRIAGE_LINE + "\n")


def test_a_broken_subflow_or_block_stops_the_flows_that_use_them(cli: Run, yard: Path) -> None:
    (yard / "flows" / "shout.yaml").write_text(
        SHOUT.replace("outputs: [loud]", "outputs: [loud, nowhere]")
    )
    code, _, err = cli("run", "parent", "--input", "text=hi", "--root", str(yard))
    assert (
        code == 1 and err.startswith("flows/shout.yaml:") and "BY408" in err and "hello" not in err
    )
    (yard / "flows" / "shout.yaml").write_text(SHOUT)
    (yard / "blocks" / "upper.yaml").write_text(
        UPPER.replace("kind: transform", "kind: transformer")
    )
    code, _, err = cli("run", "parent", "--input", "text=hi", "--root", str(yard))
    assert code == 1 and err.startswith("blocks/upper.yaml:") and "hello" not in err


def test_a_broken_config_stops_every_flow(cli: Run, yard: Path) -> None:
    (yard / "blockyard.yaml").write_text("models: 5\n")
    code, _, err = cli("run", "shout", "--input", "text=hi", "--root", str(yard))
    assert code == 1 and err.startswith("blockyard.yaml:1:9: error") and "\nerror" not in err
    with pytest.raises(ValidationFailed, match="'models' must be a mapping") as caught:
        Yard.load(yard)
    assert {d.file for d in caught.value.diagnostics} == {"blockyard.yaml"}


def test_graph_judges_one_flow(cli: Run, yard: Path) -> None:
    code, out, _ = cli("graph", "shout", "--root", str(yard))
    assert code == 0 and out.startswith("flowchart")
    code, out, err = cli("graph", "hello", "--root", str(yard))
    assert (code, out) == (1, "") and err.startswith(HELLO_LINE)


def test_flow_tests_of_healthy_flows_run_and_a_broken_flow_reports(cli: Run, yard: Path) -> None:
    (yard / "flows" / "shout.test.yaml").write_text(
        "flow: shout\ntests:\n  - name: loud\n    inputs: {text: a}\n    expect: {outputs: {loud: A}}\n"
    )
    (yard / "flows" / "hello.test.yaml").write_text("flow: hello\ntests:\n  - name: greets\n")
    code, out, _ = cli("test", "--root", str(yard))
    lines = out.splitlines()
    assert code == 1
    assert (
        "FAIL flows/hello.test.yaml: greets" in lines
        and "PASS flows/shout.test.yaml: loud" in lines
    )
    assert (
        lines[lines.index("FAIL flows/hello.test.yaml: greets") + 1].strip().startswith(HELLO_LINE)
    )
    assert lines[-1] == "1 passed, 1 failed"


def test_python_api_runs_healthy_flows_of_a_broken_yard(yard: Path) -> None:
    with Yard.load(yard, state=yard / "state.db") as api:
        assert api.run("parent", {"text": "ok"}).outputs == {"loud": "OK"}
        with pytest.raises(
            ValidationFailed, match="step 'greet' uses unknown block 'greeet'"
        ) as caught:
            api.run("hello")
        assert {d.file for d in caught.value.diagnostics} == {"flows/hello.yaml"}
        assert [d.file for d in api.problems("triage_ticket")] == ["flows/triage_ticket.yaml"]
        assert api.problems("shout") == []
        assert {d.file for d in api.diagnostics} == {"flows/hello.yaml", "flows/triage_ticket.yaml"}


def test_a_paused_run_resumes_on_its_pinned_definition_whatever_the_files_say(
    cli: Run, yard: Path
) -> None:
    (yard / "flows" / "ask.yaml").write_text(
        "flow: ask\noutputs: [loud]\nsteps:\n  - id: gate\n    approval: {message: go?}\n"
        "  - {id: up, uses: upper, with: {text: ok}}\n"
    )
    code, _, err = cli("run", "ask", "--run-id", "paused", "--root", str(yard))
    assert code == 3, err
    (yard / "flows" / "ask.yaml").write_text("flow: ask\nsteps: 5\n")  # the flow is broken now
    code, out, err = cli("resume", "paused", "--approve", "--root", str(yard))
    assert (code, out) == (0, "loud: OK\n"), err


def test_a_broken_delegated_flow_stops_the_agent_flow_that_delegates_to_it(yard: Path) -> None:
    (yard / "blocks" / "boss.yaml").write_text(
        "block: boss\nkind: agent\ninputs: {text: {type: string}}\noutputs: {answer: {type: string}}\n"
        'prompt: {user: "{{ text }}"}\n'
    )
    (yard / "flows" / "team.yaml").write_text(
        "flow: team\ninputs: {text: {type: string}}\noutputs: [answer]\nsteps:\n"
        "  - {id: lead, uses: boss, delegates: [shout]}\n"
    )
    with Yard.load(yard, state=yard / "state.db") as api:
        assert api.problems("team") == []
    (yard / "flows" / "shout.yaml").write_text(
        SHOUT.replace("outputs: [loud]", "outputs: [loud, nowhere]")
    )
    with Yard.load(yard, state=yard / "state.db") as api:
        assert {d.file for d in api.problems("team")} == {"flows/shout.yaml"}


def test_the_prompt_files_a_flow_uses_are_part_of_its_closure(make_yard: YardMaker) -> None:
    root = make_yard(
        {
            "blocks/upper.yaml": UPPER,
            "flows/shout.yaml": SHOUT,
            "blocks/greeter.yaml": """\
            block: greeter
            kind: llm
            inputs: {name: {type: string}}
            outputs: {greeting: {type: string}}
            prompt: {system_file: prompts/greet.md, user: "{% include 'prompts/user.md' %} {{ name }}"}
            """,
            "flows/hello.yaml": "flow: hello\noutputs: [greeting]\nsteps:\n  - {id: greet, uses: greeter}\n",
            "prompts/greet.md": "Greet. {% include 'prompts/rules.md' %}",
            "prompts/rules.md": "Be brief. {% include 'prompts/missing.md' %}",
            "prompts/user.md": "Say hello to",
        }
    )
    project = load_project(root)
    hello = closure(project, "hello")
    assert hello.prompts == {
        "prompts/greet.md",
        "prompts/rules.md",
        "prompts/user.md",
        "prompts/missing.md",
    }
    assert hello.prompts <= hello.files
    assert closure(project, "shout").prompts == set()


def test_running_a_flow_checks_only_its_closure(
    yard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` (Yard.problems, Yard.bundle) checks the flows of the closure, not the yard's every flow."""
    checked: list[str] = []
    check_flow = semantic.check_flow

    def counting(project: Project, definition: FlowDef, *args: Any) -> list[Diagnostic]:
        checked.append(definition.spec.flow)
        return check_flow(project, definition, *args)

    monkeypatch.setattr(semantic, "check_flow", counting)
    with Yard.load(yard, state=yard / "state.db") as api:
        assert api.problems("parent") == []
        api.bundle("parent")
        assert sorted(checked) == ["parent", "shout"]


def test_the_closure_check_finds_every_problem_the_whole_check_finds(make_yard: YardMaker) -> None:
    """For every flow, the problems of its closure alone are those the whole yard's check gives it:
    semantic errors in a block it uses, in a subflow, in a block file named after a block it uses,
    and in flows and blocks it does not use."""
    root = make_yard(
        {
            "blocks/upper.yaml": UPPER.replace(
                'compute: {loud: "text | upper"}', 'compute: {loud: "text | upper", extra: "1"}'
            ),
            "blocks/lower.yaml": UPPER.replace("block: upper", "block: lower").replace(
                "kind: transform", "kind: llm"
            ),
            "blocks/quiet.yaml": UPPER.replace("block: upper", "block: hushed").replace(
                "kind: transform", "kind: llm"
            ),
            "flows/shout.yaml": SHOUT,
            "flows/parent.yaml": PARENT,
            "flows/quiet.yaml": "flow: quiet\noutputs: [loud]\nsteps:\n  - {id: q, uses: quiet}\n",
            "flows/alone.yaml": "flow: alone\noutputs: [nowhere]\nsteps:\n  - {id: low, uses: "
            "lower, with: {text: a}}\n",
            "blocks/echo.yaml": UPPER.replace("block: upper", "block: echo"),
            "flows/fine.yaml": "flow: fine\noutputs: [loud]\nsteps:\n  - {id: e, uses: echo, with: {text: a}}\n",
        }
    )
    project = load_project(root)
    whole = [*project.diagnostics, *semantic.check_project(project)]
    with Yard.load(root, state=root / "state.db") as api:
        for name in project.flows:
            assert api.problems(name) == flow_problems(project, whole, name), name
        assert api.problems("fine") == [] and {d.file for d in api.problems("parent")} == {
            "blocks/upper.yaml"
        }
        assert {d.file for d in api.problems("alone")} == {"flows/alone.yaml", "blocks/lower.yaml"}
    code, _, err = _cli("run", "parent", "--input", "text=hi", "--root", str(root))
    upper = [d.format() for d in whole if d.file == "blocks/upper.yaml" and d.severity == "error"]
    # file:line:col as `validate` prints it
    assert code == 1 and upper and err.splitlines() == upper


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()
