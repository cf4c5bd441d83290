"""Example-file harness: every case folder under tests/examples/ is a small yard run through `validate`.

Case format (drop a folder in to add a regression case; no code needed):

    tests/examples/valid/<case>/      blocks/*.yaml, flows/*.yaml, optional blockyard.yaml
                                      -> must validate with no errors (warnings are allowed), exit 0
    tests/examples/invalid/<case>/    the same, plus expected.txt
                                      -> the text report must be exactly the lines of expected.txt,
                                         e.g. `flows/x.yaml:3:5: error BY123 message`, sorted as
                                         `blockyard validate` prints them, paths relative to the case
                                         folder; exit 1 when any line is an error

Each invalid case also runs through the json, github and sarif formats, which must report the
same problems: file, line, column, severity and code everywhere, and the exact message wherever the
format carries one unchanged (json, sarif; github escapes it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.validate.command import validate_command

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
VALID = sorted(p for p in (EXAMPLES / "valid").iterdir() if p.is_dir())
INVALID = sorted(p for p in (EXAMPLES / "invalid").iterdir() if p.is_dir())
TEXT_LINE = re.compile(
    r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning) "
    r"(?P<code>BY\d{3}) (?P<message>.+)$"
)
GITHUB_LINE = re.compile(r"^::(?P<severity>error|warning) (?P<props>[^:]*)::(?P<message>.*)$")

Problem = tuple[str, int, int, str, str, str]  # file, line, col, severity, code, message


def run(
    case: Path, fmt: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    monkeypatch.chdir(case)
    code = validate_command([], fmt, None)
    return code, capsys.readouterr().out


def parse_text(output: str) -> list[Problem]:
    problems = []
    for line in output.splitlines():
        match = TEXT_LINE.match(line)
        assert match is not None, f"not a diagnostic line: {line!r}"
        problems.append(
            (
                match["file"],
                int(match["line"]),
                int(match["col"]),
                match["severity"],
                match["code"],
                match["message"],
            )
        )
    return problems


def _unescape(value: str) -> str:
    for escaped, plain in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        value = value.replace(escaped, plain)
    return value


def parse_github(output: str) -> list[Problem]:
    lines = output.splitlines()
    assert lines[-1].startswith(("::error::", "::notice::")), (
        "the last line must be the summary annotation"
    )
    problems = []
    for line in lines[:-1]:
        match = GITHUB_LINE.match(line)
        assert match is not None, f"not a workflow command: {line!r}"
        props = dict(part.split("=", 1) for part in match["props"].split(","))
        assert set(props) == {"file", "line", "col", "title"}
        problems.append(
            (
                _unescape(props["file"]),
                int(props["line"]),
                int(props["col"]),
                match["severity"],
                _unescape(props["title"]),
                _unescape(match["message"]),
            )
        )
    return problems


def parse_json(output: str) -> list[Problem]:
    return [
        (d["file"], d["line"], d["col"], d["severity"], d["code"], d["message"])
        for d in json.loads(output)
    ]


def parse_sarif(output: str) -> list[Problem]:
    document = json.loads(output)
    assert document["version"] == "2.1.0"
    (run_,) = document["runs"]
    rules = run_["tool"]["driver"]["rules"]
    problems = []
    for result in run_["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        problems.append(
            (
                physical["artifactLocation"]["uri"],
                physical["region"]["startLine"],
                physical["region"]["startColumn"],
                result["level"],
                result["ruleId"],
                result["message"]["text"],
            )
        )
    return problems


def expected_lines(case: Path) -> list[str]:
    return (case / "expected.txt").read_text(encoding="utf-8").rstrip("\n").splitlines()


@pytest.mark.parametrize("case", VALID, ids=[p.name for p in VALID])
def test_valid_case_has_no_errors(
    case: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, output = run(case, "text", capsys, monkeypatch)
    errors = [p for p in parse_text(output) if p[3] == "error"]
    assert errors == [], output
    assert code == 0


@pytest.mark.parametrize("case", INVALID, ids=[p.name for p in INVALID])
def test_invalid_case_reports_exactly_the_expected_lines(
    case: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = expected_lines(case)
    code, output = run(case, "text", capsys, monkeypatch)
    assert output.splitlines() == expected
    assert code == (1 if any(p[3] == "error" for p in parse_text(output)) else 0)


@pytest.mark.parametrize("case", INVALID, ids=[p.name for p in INVALID])
def test_every_format_reports_the_same_problems(
    case: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = parse_text("\n".join(expected_lines(case)))
    where = [p[:5] for p in expected]
    for fmt, parse in (("json", parse_json), ("sarif", parse_sarif), ("github", parse_github)):
        code, output = run(case, fmt, capsys, monkeypatch)
        found = parse(output)
        assert [p[:5] for p in found] == where, fmt
        assert [p[5] for p in found] == [p[5] for p in expected], fmt
        assert code == (1 if any(p[3] == "error" for p in expected) else 0), fmt


def test_there_are_cases_of_both_kinds() -> None:
    assert VALID and INVALID
    for case in INVALID:
        assert (case / "expected.txt").is_file(), f"{case.name}: an invalid case needs expected.txt"
