"""Hostile literals in definitions and flow tests: a diagnostic at the line and column, never a
crash (Python's int() refuses more than 4300 digits, and accepts no '²' although '²'.isdigit())."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main

BLOCK = """
block: double
kind: transform
inputs: {n: {type: integer}}
outputs: {twice: {type: integer}}
compute: {twice: "n * 2"}
"""
MANY = "1" * 5000


def validate(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, list[dict[str, object]]]:
    code = main(["validate", "--format", "json", "--root", str(root)])
    out, err = capsys.readouterr()
    assert "internal error" not in err, err
    return code, json.loads(out)


@pytest.mark.parametrize(
    ("uses", "code", "col"),
    [("double@²", "BY210", 11), (f"double@{MANY}", "BY211", 11)],
    ids=["superscript", "5000 digits"],
)
def test_block_references_with_odd_versions(
    make_yard: Callable[[dict[str, str]], Path],
    capsys: pytest.CaptureFixture[str],
    uses: str,
    code: str,
    col: int,
) -> None:
    root = make_yard(
        {
            "blocks/double.yaml": BLOCK,
            "flows/f.yaml": f"flow: f\nsteps:\n  - id: a\n    uses: '{uses}'\n    with: {{n: 1}}\n",
        }
    )
    exit_code, found = validate(capsys, root)
    assert exit_code == 1
    assert [(d["code"], d["line"], d["col"]) for d in found] == [(code, 4, col)]
    assert len(str(found[0]["message"])) < 300


@pytest.mark.parametrize(
    "cron",
    [f"*/{MANY} * * * *", f"{MANY} * * * *", "*/² * * * *", "² * * * *"],
    ids=["huge step", "huge minute", "superscript step", "superscript minute"],
)
def test_cron_fields_with_huge_or_odd_numbers(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str], cron: str
) -> None:
    root = make_yard(
        {
            "blocks/double.yaml": BLOCK,
            "flows/f.yaml": (
                f"flow: f\nschedule: {{cron: '{cron}'}}\nsteps:\n  - id: a\n    uses: double\n    with: {{n: 1}}\n"
            ),
        }
    )
    exit_code, found = validate(capsys, root)
    assert exit_code == 1
    assert [(d["code"], d["line"]) for d in found] == [("BY507", 2)]


def test_a_version_of_5000_digits(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {"blocks/double.yaml": BLOCK.replace("kind:", f"version: {'9' * 5000}\nkind:")}
    )
    exit_code, found = validate(capsys, root)
    assert exit_code == 1
    assert [(d["code"], d["line"], d["col"]) for d in found] == [("BY107", 2, 10)]


@pytest.mark.parametrize(
    ("reply", "col", "message"),
    [
        (
            "{$tool_calls: 5}",
            25,
            "$tool_calls must be a list of {name, args} calls, got the number 5",
        ),
        ("{$tool_calls: [{args: {}}]}", 26, "a tool call needs `name`"),
        ("{$txt: hi}", 18, "unknown directive '$txt'"),
    ],
)
def test_malformed_replies_in_flow_tests(
    make_yard: Callable[[dict[str, str]], Path],
    capsys: pytest.CaptureFixture[str],
    reply: str,
    col: int,
    message: str,
) -> None:
    root = make_yard(
        {
            "blocks/double.yaml": BLOCK,
            "flows/f.yaml": "flow: f\nsteps:\n  - id: a\n    uses: double\n    with: {n: 1}\n",
            "flows/f.test.yaml": f"flow: f\ntests:\n  - name: t\n    replies:\n      a:\n"
            f"        - {reply}\n",
        }
    )
    code = main(["test", "--root", str(root)])
    _, err = capsys.readouterr()
    assert code == 1, err
    assert f"flows/f.test.yaml:6:{col}: error BY516 test 't', reply 1 for 'a': {message}" in err


def test_huge_integers_in_flow_tests_are_a_diagnostic(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {
            "blocks/double.yaml": BLOCK,
            "flows/f.yaml": "flow: f\nsteps:\n  - id: a\n    uses: double\n    with: {n: 1}\n",
            "flows/f.test.yaml": "flow: f\ntests:\n  - name: t\n    replies: {a: [{twice: 1e30}]}\n"
            "    inputs: {n: 1000000000000000000000000000000}\n",
        }
    )
    code = main(["test", "--root", str(root)])
    _, err = capsys.readouterr()
    assert code == 1 and "flows/f.test.yaml:5:17: error BY107 integer" in err, err


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            "9.223372036854776e+18",
            "is 9.223372036854776e+18; it must be at most 9223372036854775807",
        ),
        ("-9.3e+18", "is -9.3e+18; it must be at least 1"),
        (
            "9223372036854775808",
            "integer 9223372036854775808 is outside the 64-bit range",
        ),  # refused as it loads
    ],
    ids=["integral float past 64 bits", "negative", "integer past 64 bits"],
)
def test_an_integer_setting_past_64_bits_is_refused_by_the_schema(
    make_yard: Callable[[dict[str, str]], Path],
    capsys: pytest.CaptureFixture[str],
    value: str,
    said: str,
) -> None:
    # JSON Schema takes 9.2e18 as an integer; the models turn it into one only within 64 bits: the published
    # schema bounds every integer (engine/spec/export.py), so the schema check names the bound
    config = f"models:\n  default: {{provider: mock}}\nserver:\n  max_concurrent_runs: {value}\n"
    exit_code, found = validate(capsys, make_yard({"blockyard.yaml": config}))
    assert exit_code == 1
    assert [(d["code"], d["line"], d["col"]) for d in found] == [("BY107", 4, 24)], found
    assert said in str(found[0]["message"]), found
