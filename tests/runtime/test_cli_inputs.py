"""`--input k=v` and `--inputs-file`: YAML 1.2 values, declared strings kept as typed."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from engine.cli.run import gather_inputs
from engine.core.errors import UsageError
from engine.spec import TypeSpec
from engine.spec.typecheck import coerce_inputs

DOUBLE = """
block: double
kind: transform
inputs: {n: {type: integer}}
outputs: {twice: {type: integer}}
compute: {twice: "n * 2"}
"""
TWICE = """
flow: twice
inputs: {n: {type: integer}}
outputs: [twice]
steps:
  - {id: double, uses: double, with: {n: "{{ inputs.n }}"}}
"""
DECLARED = {
    "n": TypeSpec(type="integer"),
    "zip": TypeSpec(type="string"),
    "ratio": TypeSpec(type="number"),
    "flag": TypeSpec(type="boolean", default=False),
    "tags": TypeSpec(type="array", default=[]),
    "extra": TypeSpec(type="any", default=None),
}


@pytest.mark.parametrize(
    ("pair", "key", "value"),
    [
        ("n=0", "n", 0),
        ("zip=0", "zip", "0"),
        ("zip=007", "zip", "007"),  # the text as typed, not str(7)
        ("zip=1e3", "zip", "1e3"),
        ("ratio=0.5", "ratio", 0.5),
        ("flag=true", "flag", True),
        ("tags=[a, b]", "tags", ["a", "b"]),
        ("extra=yes", "extra", "yes"),  # YAML 1.2: no Norway problem
        ("extra={a: 1}", "extra", {"a": 1}),
        ("extra=", "extra", ""),  # nothing after = is an empty string, not null
    ],
)
def test_values_are_typed(pair: str, key: str, value: object) -> None:
    given = gather_inputs(DECLARED, ["n=1", "zip=x", "ratio=1", pair], None)
    assert coerce_inputs(DECLARED, given, where="flow 'f'")[key] == value


def test_inputs_file_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text("n: 5\nzip: '75001'\nratio: 2.5\n")
    given = gather_inputs(DECLARED, ["n=6"], path)
    assert given == {"n": 6, "zip": "75001", "ratio": 2.5}
    json_file = tmp_path / "in.json"
    json_file.write_text('{"n": 1, "zip": "x", "ratio": 1}')
    assert gather_inputs(DECLARED, [], json_file) == {"n": 1, "zip": "x", "ratio": 1}


@pytest.mark.parametrize(
    ("pairs", "text", "message"),
    [
        (["novalue"], None, "expected KEY=VALUE"),
        (["=3"], None, "expected KEY=VALUE"),
        ([], "- 1\n- 2\n", "expected a mapping"),
        ([], "a: [\n", "--inputs-file"),
    ],
)
def test_bad_inputs_are_usage_errors(
    tmp_path: Path, pairs: list[str], text: str | None, message: str
) -> None:
    path = None
    if text is not None:
        path = tmp_path / "bad.yaml"
        path.write_text(text)
    with pytest.raises(UsageError, match=message):
        gather_inputs(DECLARED, pairs, path)


def test_wrong_type_and_unknown_names_are_named() -> None:
    with pytest.raises(UsageError, match="input 'n' must be an integer, got string 'many'"):
        coerce_inputs(
            DECLARED,
            gather_inputs(DECLARED, ["n=many", "zip=1", "ratio=1"], None),
            where="flow 'f'",
        )
    with pytest.raises(UsageError, match="unknown input 'zp' \\(did you mean 'zip'\\?\\)"):
        coerce_inputs(
            DECLARED, gather_inputs(DECLARED, ["n=1", "zp=1", "ratio=1"], None), where="flow 'f'"
        )


def test_an_inputs_file_in_the_yard_linking_out_of_it_is_refused(
    make_yard: Callable[[dict[str, str]], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = make_yard({"blocks/double.yaml": DOUBLE, "flows/twice.yaml": TWICE})
    outside = tmp_path / "secret.yaml"
    outside.write_text("n: 21\n", encoding="utf-8")
    (root / "inputs.yaml").symlink_to(outside)
    monkeypatch.chdir(root)
    code = main(["run", "twice", "--inputs-file", "inputs.yaml"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (
        "error: --inputs-file: inputs.yaml:1:1: error BY008 symbolic link inputs.yaml resolves outside "
        "the yard; it is not read\n"
    )
    # named outside the yard, the same file is the user's own choice
    assert main(["run", "twice", "--inputs-file", str(outside), "--json"]) == 0
    assert '"outputs":{"twice":42}' in capsys.readouterr().out


def test_an_inputs_file_named_outside_the_yard_may_be_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "inputs.fifo"  # what `--inputs-file <(make-inputs)` hands over
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("w", encoding="utf-8") as handle:
            handle.write("n: 3\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert gather_inputs(DECLARED, [], fifo, tmp_path / "yard") == {"n": 3}
    writer.join(5)
