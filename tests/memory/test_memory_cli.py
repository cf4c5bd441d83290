from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main


def run(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    (root / "flows").mkdir(exist_ok=True)  # a yard: outside one the command is refused
    code = main(["memory", *args, "--root", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def test_set_get_list_delete_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], state_backend: str
) -> None:
    assert run(capsys, tmp_path, "set", "users/ada", "lunch", "Chipotle")[0] == 0
    assert run(capsys, tmp_path, "set", "users/ada", "budget", "12.5")[0] == 0
    assert run(capsys, tmp_path, "set", "users/bob", "lunch", "Pho")[0] == 0
    code, out, _ = run(capsys, tmp_path, "list", "users/ada", "--json")
    assert code == 0
    assert json.loads(out) == {"budget": 12.5, "lunch": "Chipotle"}
    code, out, _ = run(capsys, tmp_path, "get", "users/ada", "budget", "--json")
    assert (code, json.loads(out)) == (0, 12.5)
    assert run(capsys, tmp_path, "delete", "users/ada", "budget")[0] == 0
    code, out, _ = run(capsys, tmp_path, "list", "users/ada", "--json")
    assert json.loads(out) == {"lunch": "Chipotle"}
    # on Postgres nothing is written beside the yard
    assert (tmp_path / ".blockyard" / "state.db").is_file() == (state_backend == "sqlite")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (
            "'{restaurant: Chipotle, dish: burrito}'",
            '{"restaurant": "Chipotle", "dish": "burrito"}',
        ),
        ("Chipotle", '"Chipotle"'),
        ("12.5", "12.5"),
        ("[a, b]", '["a", "b"]'),
        ("'{}'", "{}"),
    ],
)
def test_get_prints_the_value_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, shown: str
) -> None:
    # as docs/memory.md shows it: one JSON value, the same with --json
    assert run(capsys, tmp_path, "set", "users/ada", "lunch", value.strip("'"))[0] == 0
    assert run(capsys, tmp_path, "get", "users/ada", "lunch") == (0, shown + "\n", "")
    assert run(capsys, tmp_path, "get", "users/ada", "lunch", "--json") == (0, shown + "\n", "")


def test_refusals_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, tmp_path, "get", "users/ada", "x")
    assert code == 2 and "nothing has been remembered yet" in err
    run(capsys, tmp_path, "set", "users/ada", "lunch", "Chipotle")
    code, _, err = run(capsys, tmp_path, "get", "users/ada", "missing")
    assert code == 2 and "no preference 'missing' in scope 'users/ada'" in err
    code, _, err = run(capsys, tmp_path, "list", "users/../etc")
    assert code == 2 and "invalid memory scope 'users/../etc'" in err
    code, _, err = run(capsys, tmp_path, "set", "users/ada", "k")
    assert code == 2 and "needs a VALUE" in err


@pytest.mark.parametrize(
    "value",
    ["100000000000000000000000", "9" * 5000, "[1, 0x10000000000000000]"],
    ids=["10^23", "5000 digits", "nested hex"],
)
def test_a_value_beyond_64_bits_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, _, err = run(capsys, tmp_path, "set", "users/ada", "n", value)
    assert code == 2 and "memory set n: integer" in err and "64-bit range" in err, err
    assert run(capsys, tmp_path, "set", "users/ada", "n", "9223372036854775807")[0] == 0
