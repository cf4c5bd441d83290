"""`validate_command`: which yard, which files, which paths are shown, and the exit codes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

import engine.validate.semantic as semantic
from engine.core.diagnostics import Diagnostic
from engine.core.errors import UsageError
from engine.definitions.project import Project
from engine.validate.command import find_root, validate, validate_command
from tests.conftest import skip_or_fail

ECHO = """\
block: echo
kind: transform
inputs: {text: {type: string, default: ""}}
outputs: {echoed: {type: string}}
compute: {echoed: text}
"""
GOOD_FLOW = "flow: good\nsteps:\n  - {id: a, uses: echo}\n"
BAD_FLOW = "flow: bad\nsteps:\n  - {id: a, uses: echo, wiht: {}}\n"
BAD_BLOCK = "block: broken\nkind: lm\n"

YardMaker = Callable[[dict[str, str]], Path]


@pytest.fixture
def yard(make_yard: YardMaker) -> Path:
    return make_yard(
        {
            "blocks/echo.yaml": ECHO,
            "blocks/broken.yaml": BAD_BLOCK,
            "flows/good.yaml": GOOD_FLOW,
            "flows/bad.yaml": BAD_FLOW,
        }
    )


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


BAD_BLOCK_LINE = (
    "blocks/broken.yaml:2:7: error BY105 'kind' is 'lm'; expected one of: llm, decide, agent, smart, "
    "tool, transform, memory_read, memory_write, wait (did you mean 'llm'?)"
)
BAD_FLOW_LINE = (
    "flows/bad.yaml:3:25: error BY102 unknown key 'wiht' in 'steps[0]' (did you mean 'with'?)"
)


def test_whole_yard_from_its_root(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(yard)
    assert validate_command([], "text", None) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [BAD_BLOCK_LINE, BAD_FLOW_LINE]
    assert err == "2 errors in 2 files (4 checked)\n"


def test_a_subfolder_finds_the_yard_above_it(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(yard / "flows")
    assert validate_command([], "text", None) == 1
    assert lines(capsys) == [BAD_BLOCK_LINE, BAD_FLOW_LINE]


def test_file_arguments_report_only_those_files(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(yard)
    assert validate_command([Path("flows/good.yaml")], "text", None) == 0
    assert capsys.readouterr() == ("", "no problems in 1 file\n")
    assert validate_command([Path("flows/good.yaml"), Path("flows/bad.yaml")], "text", None) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [BAD_FLOW_LINE]
    assert err == "1 error in 1 file (2 checked)\n"


def test_a_folder_argument_reports_the_files_below_it(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(yard)
    assert validate_command([Path("blocks")], "text", None) == 1
    assert lines(capsys) == [BAD_BLOCK_LINE]
    assert validate_command([Path("blocks"), Path(".")], "text", None) == 1
    assert lines(capsys) == [BAD_BLOCK_LINE, BAD_FLOW_LINE]


def test_a_yard_below_the_current_folder_gets_openable_paths(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(yard.parent)
    assert validate_command([Path("yard/flows/bad.yaml")], "github", None) == 1
    assert lines(capsys)[0] == (
        "::error file=yard/flows/bad.yaml,line=3,col=25,title=BY102::unknown key 'wiht' "
        "in 'steps[0]' (did you mean 'with'?)"
    )
    assert validate_command([], "text", Path("yard")) == 1
    assert lines(capsys) == ["yard/" + BAD_BLOCK_LINE, "yard/" + BAD_FLOW_LINE]


def test_root_elsewhere_shows_yard_relative_paths(
    yard: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert validate_command([], "text", yard) == 1
    assert lines(capsys) == [BAD_BLOCK_LINE, BAD_FLOW_LINE]
    assert validate_command([yard / "flows" / "good.yaml"], "text", yard) == 0


def test_several_yards_in_one_call(
    make_yard: YardMaker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = make_yard({"flows/bad.yaml": BAD_FLOW, "blocks/echo.yaml": ECHO})
    second = tmp_path / "other"
    (second / "blocks").mkdir(parents=True)
    (second / "blocks" / "broken.yaml").write_text(BAD_BLOCK, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert validate_command([first / "flows", second], "text", None) == 1
    assert lines(capsys) == ["other/" + BAD_BLOCK_LINE, "yard/" + BAD_FLOW_LINE]


def test_semantic_problems_are_reported_and_filtered_with_the_rest(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake(project: Project) -> list[Diagnostic]:
        return [
            Diagnostic("flows/good.yaml", 3, 5, "BY999", "semantic problem"),
            Diagnostic("blocks/echo.yaml", 1, 1, "BY998", "just a warning", "warning"),
            Diagnostic("flows/good.yaml", 3, 5, "BY999", "semantic problem"),
        ]

    monkeypatch.setattr(semantic, "check_project", fake)
    monkeypatch.chdir(yard)
    assert validate_command([Path("flows/good.yaml")], "text", None) == 1
    assert lines(capsys) == ["flows/good.yaml:3:5: error BY999 semantic problem"]
    assert validate_command([Path("blocks/echo.yaml")], "text", None) == 0
    assert lines(capsys) == ["blocks/echo.yaml:1:1: warning BY998 just a warning"]


@pytest.mark.parametrize(
    ("args", "root", "message"),
    [
        (["nowhere.yaml"], None, "nowhere.yaml: no such file or folder"),
        ([], "missing", "--root missing: no such folder"),
        ([], "plain", "--root plain: not a yard (no blockyard.yaml, blocks/ or flows/ in it)"),
        (["plain"], "yard", "plain is not inside the yard yard"),
        (
            ["plain"],
            None,
            "plain is not inside a yard (no blockyard.yaml, blocks/ or flows/ in its folder or above it)",
        ),
    ],
)
def test_usage_errors(
    yard: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], root: str | None, message: str
) -> None:
    (yard.parent / "plain").mkdir()
    monkeypatch.chdir(yard.parent)
    if message.startswith("plain is not inside a yard") and find_root(yard.parent) is not None:
        skip_or_fail("the temporary folder lies inside a yard")
    with pytest.raises(UsageError, match=re.escape(message)) as caught:
        validate_command([Path(a) for a in args], "text", Path(root) if root else None)
    assert str(caught.value) == message
    assert caught.value.exit_code == 2


def test_no_yard_anywhere_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if find_root(tmp_path) is not None:
        skip_or_fail("the temporary folder lies inside a yard")
    with pytest.raises(UsageError, match="no yard here"):
        validate_command([], "text", None)


def test_unknown_format_is_a_usage_error(yard: Path) -> None:
    with pytest.raises(
        UsageError, match="unknown format 'xml'; choose one of: text, json, github, sarif"
    ):
        validate_command([], "xml", yard)


def test_a_yard_with_only_a_config_file(tmp_path: Path) -> None:
    (tmp_path / "blockyard.yaml").write_text("models: {}\n", encoding="utf-8")
    report = validate([], tmp_path)
    assert (report.diagnostics, report.files_checked) == ([], 1)


def test_custom_folders_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "blockyard.yaml").write_text("paths: {flows: defs}\n", encoding="utf-8")
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "bad.yaml").write_text(BAD_FLOW, encoding="utf-8")
    report = validate([tmp_path / "defs"], None)
    assert [(d.file, d.code) for d in report.diagnostics] == [("defs/bad.yaml", "BY102")]


def test_a_folder_outside_the_yard_is_shown_from_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    yard, shared = tmp_path / "yard", tmp_path / "shared"
    yard.mkdir()
    shared.mkdir()
    (yard / "blockyard.yaml").write_text("paths: {blocks: ../shared}\n", encoding="utf-8")
    (shared / "broken.yaml").write_text(BAD_BLOCK, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert validate_command([], "text", Path("yard")) == 1
    assert lines(capsys) == [BAD_BLOCK_LINE.replace("blocks/broken.yaml", "shared/broken.yaml")]
    monkeypatch.chdir(yard)
    assert validate_command([], "text", None) == 1
    assert lines(capsys) == [
        BAD_BLOCK_LINE.replace("blocks/broken.yaml", (shared / "broken.yaml").as_posix())
    ]
