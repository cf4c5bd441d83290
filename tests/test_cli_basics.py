"""The CLI around validation: exit codes 0/1/2 with their exact output, listings, `init`, `python -m engine`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from engine.cli.starter import init_command

REPO = Path(__file__).resolve().parents[1]
ECHO = """\
block: echo
description: Repeat a text.
kind: transform
inputs: {text: {type: string, default: ""}}
outputs: {echoed: {type: string}}
compute: {echoed: text}
category: text
tags: [basic]
"""
SUMMARIZE = """\
block: summarize
description: |
  Summarize a text.
  (second line not shown in listings)
kind: llm
inputs: {text: {type: string}}
outputs: {summary: {type: string}}
prompt: {user: "Summarize: {{ text }}"}
tags: [nlp, Text]
"""
FLOW = """\
flow: say
description: Say something twice.
steps:
  - {id: once, uses: echo, with: {text: hi}}
  - id: again
    loop:
      max_iterations: 2
      steps:
        - {id: repeat, uses: echo}
"""
BROKEN = "flow: broken\nstep: []\n"

YardMaker = Callable[[dict[str, str]], Path]
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _definitions(root: Path) -> int:
    """Blocks, flows, blockyard.yaml, and the eval files with the datasets they read (evals/data/)."""
    return (
        sum(
            1
            for folder in ("blocks", "flows")
            for p in (root / folder).rglob("*.yaml")
            if not p.name.endswith(".test.yaml")
        )
        + (root / "blockyard.yaml").is_file()
        + sum(1 for p in (root / "evals").rglob("*") if p.is_file())
    )


def test_validate_clean_yard_exits_0(cli: Run) -> None:
    assert cli("validate", "--root", str(REPO)) == (
        0,
        "",
        f"no problems in {_definitions(REPO)} files\n",
    )


def test_validate_errors_exit_1_with_exact_lines(cli: Run, make_yard: YardMaker) -> None:
    root = make_yard({"blocks/echo.yaml": ECHO, "flows/broken.yaml": BROKEN})
    assert cli("validate", "--root", str(root)) == (
        1,
        (
            "flows/broken.yaml:1:1: error BY103 missing required key 'steps'\n"
            "flows/broken.yaml:2:1: error BY102 unknown key 'step' (did you mean 'steps'?)\n"
        ),
        "2 errors in 1 file (2 checked)\n",
    )


def test_validate_json_on_clean_yard(cli: Run, make_yard: YardMaker) -> None:
    root = make_yard({"blocks/echo.yaml": ECHO})
    assert cli("validate", "--format", "json", "--root", str(root)) == (0, "[]\n", "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["validate", "no/such/file.yaml"], "error: no/such/file.yaml: no such file or folder\n"),
        (["validate", "--root", "no/such/dir"], "error: --root no/such/dir: no such folder\n"),
    ],
)
def test_validate_usage_errors_exit_2(
    cli: Run, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(*args) == (2, "", message)


def test_unknown_format_exits_2(cli: Run) -> None:
    code, out, err = cli("validate", "--format", "xml")
    assert (code, out) == (2, "")
    assert (
        "Invalid value for '--format': 'xml' is not one of 'text', 'json', 'github', 'sarif'."
        in err
    )


def test_python_dash_m_engine_is_the_cli(make_yard: YardMaker) -> None:
    root = make_yard({"blocks/echo.yaml": ECHO, "flows/broken.yaml": BROKEN})
    result = subprocess.run(
        [sys.executable, "-m", "engine", "validate", "--format", "github"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "::error::blockyard validate: 2 problems in 1 file"
    helped = subprocess.run(
        [sys.executable, "-m", "engine", "--help"], capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0
    assert "validate" in helped.stdout and "Usage: blockyard" in helped.stdout


def test_flows_listing(cli: Run, make_yard: YardMaker) -> None:
    root = make_yard({"blocks/echo.yaml": ECHO, "flows/say.yaml": FLOW})
    assert cli("flows", "--root", str(root)) == (
        0,
        ("NAME  VERSION  STEPS  DESCRIPTION\nsay   1        3      Say something twice.\n"),
        "",
    )


def test_flows_listing_warns_about_broken_files(cli: Run, make_yard: YardMaker) -> None:
    root = make_yard(
        {"blocks/echo.yaml": ECHO, "flows/say.yaml": FLOW, "flows/broken.yaml": BROKEN}
    )
    code, out, err = cli("flows", "--root", str(root))
    assert (code, out.splitlines()[1].split()[0]) == (0, "say")
    assert err == (
        "warning: 1 file(s) could not be loaded and are not listed (see `blockyard validate`): "
        "flows/broken.yaml\n"
    )


def test_empty_listings(cli: Run, make_yard: YardMaker) -> None:
    root = make_yard({})
    assert cli("flows", "--root", str(root)) == (0, "", f"no flows in {root / 'flows'}\n")
    assert cli("blocks", "--root", str(root)) == (0, "", f"no blocks in {root / 'blocks'}\n")


def test_blocks_listing_and_filters(cli: Run, make_yard: YardMaker) -> None:
    root = make_yard(
        {
            "blocks/echo.yaml": ECHO,
            "blocks/summarize.yaml": SUMMARIZE,
            "blocks/echo2.yaml": ECHO.replace("block: echo\n", "block: echo\nversion: 2\n"),
        }
    )
    header = "NAME       VERSION  KIND       CATEGORY  TAGS       DESCRIPTION\n"
    echo = "echo       2 (1)    transform  text      basic      Repeat a text.\n"
    summarize = "summarize  1        llm                  nlp, Text  Summarize a text.\n"
    assert cli("blocks", "--root", str(root)) == (0, header + echo + summarize, "")
    assert (
        cli("blocks", "--root", str(root), "--tag", "text")[1]
        .splitlines()[1]
        .startswith("summarize")
    )
    assert (
        cli("blocks", "--root", str(root), "--category", "TEXT")[1]
        .splitlines()[1]
        .startswith("echo")
    )
    assert cli("blocks", "--root", str(root), "--tag", "nlpp") == (
        0,
        "",
        "no blocks with tag 'nlpp' (did you mean 'nlp'?)\n",
    )
    assert cli("blocks", "--root", str(root), "--tag", "nlp", "--category", "text") == (
        0,
        "",
        "no blocks with tag 'nlp' and category 'text'\n",
    )


def test_init_writes_a_yard_that_validates(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("init", "starter")
    assert (code, err) == (0, "")
    assert out == (
        "Created a yard in starter:\n  blockyard.yaml\n  blocks/greet.yaml\n  flows/hello.yaml\n"
        "  schemas/block.schema.json\n  schemas/config.schema.json\n  schemas/eval.schema.json\n"
        "  schemas/flow.schema.json\n  schemas/flowtest.schema.json\n  schemas/reactflow.schema.json\n"
        "  schemas/taskplan.schema.json\n  .gitignore\nNext:\n  blockyard validate --root starter\n"
        "  blockyard run hello --root starter --input name=Ada\n"
    )
    assert (
        (tmp_path / "starter" / ".gitignore").read_text(encoding="utf-8").endswith(".blockyard/\n")
    )
    assert cli("validate", "--root", "starter") == (0, "", "no problems in 3 files\n")
    assert cli("flows", "--root", "starter")[1].splitlines()[1].split()[:3] == ["hello", "1", "1"]


def test_init_never_overwrites(cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "hello.yaml").write_text("mine\n", encoding="utf-8")
    (tmp_path / ".gitignore").write_text("node_modules/\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("init")
    assert (code, out) == (1, "")
    assert err == (
        f"error: {tmp_path / 'flows' / 'hello.yaml'} already exists; `blockyard init` never "
        "overwrites files (choose an empty folder: blockyard init DIR)\n"
    )
    assert (tmp_path / "flows" / "hello.yaml").read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "blockyard.yaml").exists()
    (tmp_path / "flows" / "hello.yaml").unlink()
    code, out, _ = cli("init")
    assert code == 0
    assert "add .blockyard/ to your .gitignore" in out and "--root" not in out
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == "node_modules/\n"


def test_init_into_a_file_fails(
    cli: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "taken"
    target.write_text("x", encoding="utf-8")
    code, _, err = cli("init", str(target))
    assert code == 2 and "is a file" in err  # click checks the argument before init runs
    assert init_command(target) == 1
    assert capsys.readouterr().err == f"error: {target} exists and is not a folder\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runs", "--limit", "99999999999999999999"], "is not in the range 1<=x<=100000"),
        (["threads", "--limit", "-5"], "is not in the range 1<=x<=100000"),
        (["serve", "--grace", "nan"], "'nan' is not a number of seconds"),
        (["serve", "--grace", "inf"], "is not in the range 0<=x<=86400"),
    ],
)
def test_out_of_range_numbers_are_usage_errors(
    cli: Run, tmp_path: Path, args: list[str], message: str
) -> None:
    code, _, err = cli(*args, "--root", str(tmp_path))
    assert code == 2
    assert message in err


@pytest.mark.parametrize(
    "args",
    [
        ["run", "hello"],
        ["resume", "r1"],
        ["runs"],
        ["runs", "show", "r1"],
        ["gates"],
        ["threads"],
        ["graph", "hello"],
        ["test"],
        ["flows"],
        ["blocks"],
        ["memory", "list", "s"],
        ["schedules"],
        ["watch"],
        ["serve"],
        ["compose", "x"],
    ],
)
def test_commands_outside_a_yard_say_there_is_no_yard(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(*args)
    assert (code, out) == (2, "")
    assert err == (
        f"error: no yard here ({tmp_path.resolve()}): no blockyard.yaml, flows/ or blocks/ — run in a "
        "yard or pass --root\n"
    )
    assert not (tmp_path / ".blockyard").exists()  # nothing was created there


def test_a_yard_needs_only_one_of_its_parts(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    code, _, err = cli("run", "hello", "--root", str(tmp_path))
    assert (code, err) == (2, "error: unknown flow 'hello' (the yard has no flows)\n")
