"""YAML safety of the loader, end to end: each hostile or broken file gives exactly one diagnostic.

Every case is written as flows/x.yaml of a fresh yard and run through `validate` (loader, schema
and semantic checks), so a case also proves that nothing downstream adds noise or crashes.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from engine.definitions import load
from engine.definitions.files import Bounds
from engine.definitions.load import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    LoadError,
    load_bytes,
    load_file,
    parse_value,
)
from engine.validate.command import validate
from tests.conftest import skip_or_fail

BILLION_LAUGHS = b"""\
flow: lol
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""

# name, file content, code, line, col, a piece of the message
CASES: list[tuple[str, bytes, str, int, int, str]] = [
    (
        "python tag",
        b"flow: x\nsteps: !!python/object/apply:os.system ['ls']\n",
        "BY003",
        2,
        8,
        "python/object/apply:os.system' is not allowed",
    ),
    ("python name tag", b"flow: !!python/name:os.system x\n", "BY003", 1, 7, "is not allowed"),
    (
        "custom tag",
        b"flow: x\nsteps: !include other.yaml\n",
        "BY003",
        2,
        8,
        "tag '!include' is not allowed",
    ),
    (
        "binary tag",
        b"flow: x\ndescription: !!binary aGVsbG8=\n",
        "BY003",
        2,
        14,
        "binary' is not allowed",
    ),
    ("set tag", b"flow: x\ntags: !!set {a, b}\n", "BY003", 2, 7, "set' is not allowed"),
    (
        "wrong explicit int",
        b"flow: x\nversion: !!int two\n",
        "BY002",
        2,
        10,
        "'two' is not a valid int",
    ),
    (
        "duplicate key",
        b"flow: x\nversion: 1\ndescription: a\nversion: 2\nsteps: [{id: a, uses: b}]\n",
        "BY004",
        4,
        1,
        "duplicate key 'version' (first defined at line 2)",
    ),
    (
        "nested duplicate key",
        b"flow: x\nsteps:\n  - id: a\n    uses: b\n    id: c\n",
        "BY004",
        5,
        5,
        "duplicate key 'id' (first defined at line 3)",
    ),
    ("billion laughs", BILLION_LAUGHS, "BY005", 7, 8, "alias bomb"),
    (
        "deep flow nesting",
        b"flow: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        "BY005",
        1,
        7 + MAX_DEPTH,
        f"nesting deeper than {MAX_DEPTH} levels",
    ),
    (
        "deep block nesting",
        b"flow:\n" + b"".join(b"  " * i + b"k:\n" for i in range(1, 200)),
        "BY005",
        MAX_DEPTH + 2,
        2 * (MAX_DEPTH + 1) + 1,
        "nesting deeper",
    ),
    (
        "recursive alias",
        b"flow: x\nsteps: &s [1, *s]\n",
        "BY002",
        2,
        15,
        "unknown or recursive alias *s",
    ),
    ("empty file", b"", "BY006", 1, 1, "file is empty"),
    ("only comments", b"# TODO\n# later\n", "BY006", 1, 1, "file is empty"),
    ("only null", b"~\n", "BY006", 1, 1, "file is empty"),
    ("unclosed list", b"flow: x\nsteps: [a, b\n", "BY002", 3, 1, "YAML syntax error"),
    ("tab indentation", b"flow: x\n\tsteps: 1\n", "BY002", 2, 1, "tab character"),
    ("bad indentation", b"flow: x\n steps: 1\n", "BY002", 2, 7, "YAML syntax error"),
    (
        "prose",
        b"This is a note, not a definition.\n",
        "BY101",
        1,
        1,
        "expected a mapping with a 'flow:' key at the top, found the string 'This is a note",
    ),
    ("list at the top", b"- id: a\n  uses: b\n", "BY101", 1, 1, "found a list"),
    ("number at the top", b"42\n", "BY101", 1, 1, "found the number 42"),
    ("binary garbage", bytes(range(256)), "BY001", 2, 118, "not a UTF-8 text file"),
    (
        "invalid UTF-8",
        b"flow: x\ndescription: caf\xe9 au lait\n",
        "BY001",
        2,
        17,
        "not a UTF-8 text file",
    ),
    ("NUL byte", b"flow: x\nversion: 1\x00\n", "BY001", 2, 1, "contains NUL bytes"),
    (
        "two documents",
        b"flow: a\nsteps: [{id: a, uses: b}]\n---\nflow: b\n",
        "BY007",
        3,
        1,
        "more than one YAML document",
    ),
    (
        "merge key",
        b"base: &b {id: a, uses: x}\nflow: x\nsteps:\n  - <<: *b\n    id: c\n",
        "BY002",
        4,
        5,
        "merge keys ('<<') are YAML 1.1 only",
    ),
    (
        "complex key",
        b"flow: x\n? [a, b]\n: c\n",
        "BY002",
        2,
        3,
        "mapping keys must be plain scalars",
    ),
]


def _only_diagnostic(root: Path) -> tuple[str, str, int, int, str]:
    report = validate([], root)
    assert len(report.diagnostics) == 1, [d.format() for d in report.diagnostics]
    d = report.diagnostics[0]
    return d.file, d.code, d.line, d.col, d.message


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("content", "code", "line", "col", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_one_diagnostic_at_the_right_place(
    tmp_path: Path, content: bytes, code: str, line: int, col: int, fragment: str
) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "x.yaml").write_bytes(content)
    file, found_code, found_line, found_col, message = _only_diagnostic(tmp_path)
    assert (file, found_code, found_line, found_col) == ("flows/x.yaml", code, line, col), message
    assert fragment in message


class _CappedLoader(yaml.SafeLoader):
    """The pure-Python parser with a nesting cap in its scanner, as libyaml has one from 0.2.6 (bundled
    from PyYAML 6.0.4 on): what a parser's own cap does to our diagnostic is tested whatever PyYAML is
    installed. Like libyaml's, the scanner reads up to 1024 characters ahead to tell an implicit key."""

    CAP = 200

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= self.CAP:
            mark = self.get_mark()
            raise yaml.scanner.ScannerError(
                "while increasing flow level", mark, "exceeded maximum nesting depth", mark
            )
        super().fetch_flow_collection_start(TokenClass)


_LOADERS = [pytest.param(yaml.SafeLoader, id="python"), pytest.param(_CappedLoader, id="capped")]
if hasattr(yaml, "CSafeLoader"):
    _LOADERS.insert(0, pytest.param(yaml.CSafeLoader, id="libyaml"))


def _flow(levels: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return b"flow: " + opener * levels + closer * levels + b"\n"


# name, content, (line, col) of the collection that goes deeper than MAX_DEPTH
DEEP: list[tuple[str, bytes, tuple[int, int]]] = [
    ("flow just too deep", _flow(MAX_DEPTH + 1), (1, 7 + MAX_DEPTH)),
    ("flow beyond the parser caps", _flow(1000), (1, 7 + MAX_DEPTH)),  # libyaml 0.2.6 stops at 1000
    ("flow far beyond", _flow(100_000), (1, 7 + MAX_DEPTH)),
    ("flow mappings", _flow(5000, b"{a: ", b"}"), (1, 7 + 4 * MAX_DEPTH)),
    ("flow in a flow", b"flow: [" + _flow(5000)[6:-1] + b"]\n", (1, 7 + MAX_DEPTH)),
    (
        "block just too deep",
        b"flow:\n" + b"".join(b"  " * i + b"k:\n" for i in range(1, MAX_DEPTH + 2)),
        (MAX_DEPTH + 2, 2 * (MAX_DEPTH + 1) + 1),
    ),
    ("block on one line", b"flow:\n  " + b"- " * 5000 + b"x\n", (2, 3 + 2 * MAX_DEPTH)),
    (
        "block then flow",
        b"flow:\n  " + b"- " * 30 + b"[" * 3000 + b"]" * 3000 + b"\n",
        (2, 3 + MAX_DEPTH + 30),
    ),
    (
        "after 100 KB",
        b"flow: x\n"
        + b"".join(b"k%d: v\n" % i for i in range(12_000))
        + b"z: "
        + b"[" * 3000
        + b"]" * 3000
        + b"\n",
        (12_002, 4 + MAX_DEPTH),
    ),
    (
        "after wide lines",
        'flow: "é😀"\r\nx: '.encode() + b"[" * 3000 + b"]" * 3000 + b"\n",
        (2, 4 + MAX_DEPTH),
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loader", _LOADERS)
@pytest.mark.parametrize(
    ("content", "where"), [case[1:] for case in DEEP], ids=[case[0] for case in DEEP]
)
def test_too_deep_is_by005_where_it_gets_too_deep_whatever_the_parser(
    monkeypatch: pytest.MonkeyPatch, loader: type, content: bytes, where: tuple[int, int]
) -> None:
    """One code and one place for too deep a document, whether the parser has a nesting cap of its own
    (libyaml from 0.2.6) that its look-ahead reaches before our check sees the events, or none."""
    monkeypatch.setattr(load, "_Loader", loader)
    with pytest.raises(LoadError, match="nesting deeper than 64 levels") as caught:
        load_bytes(content, "x.yaml")
    found = caught.value.diagnostic
    assert (found.code, found.line, found.col, found.message) == (
        "BY005",
        *where,
        f"nesting deeper than {MAX_DEPTH} levels",
    ), found.format()


@pytest.mark.parametrize("loader", _LOADERS)
def test_a_problem_before_the_depth_is_still_the_one_reported(
    monkeypatch: pytest.MonkeyPatch, loader: type
) -> None:
    """Composing again up to where a parser's cap tripped keeps the document's order: an earlier
    problem is reported, as without a cap."""
    monkeypatch.setattr(load, "_Loader", loader)
    with pytest.raises(LoadError, match="duplicate key 'a'") as caught:
        load_bytes(b"flow: [[[{a: 1, a: 2}, " + b"[" * 3000 + b"]" * 3000 + b"]]]\n", "x.yaml")
    assert (
        caught.value.diagnostic.format()
        == "x.yaml:1:17: error BY004 duplicate key 'a' (first defined at line 1)"
    )


def test_a_parser_cap_that_cannot_be_placed_is_still_by005(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cap reported without a usable position in the text is BY005 where the parser stopped."""

    class Blind(_CappedLoader):
        def get_mark(self) -> Any:
            mark = super().get_mark()
            return yaml.Mark(mark.name, -1, mark.line, mark.column, mark.buffer, mark.pointer)

    monkeypatch.setattr(load, "_Loader", Blind)
    with pytest.raises(LoadError, match="nesting deeper than 64 levels") as caught:
        load_bytes(_flow(1000), "x.yaml")
    assert (
        caught.value.diagnostic.format()
        == f"x.yaml:1:207: error BY005 nesting deeper than {MAX_DEPTH} levels"
    )


def test_a_50_mb_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    (tmp_path / "blocks").mkdir()
    big = tmp_path / "blocks" / "big.yaml"
    with big.open("wb") as handle:  # sparse: the size is real, the disk use is not
        handle.truncate(50 * 1024 * 1024)
    assert _only_diagnostic(tmp_path) == (
        "blocks/big.yaml",
        "BY001",
        1,
        1,
        f"file is 52.4 MB; definitions are limited to {MAX_FILE_BYTES // 1024} KiB",
    )


def test_a_file_just_under_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    padding = "# " + "x" * 1000 + "\n"
    body = "flow: x\n"
    path.write_text(
        padding * ((MAX_FILE_BYTES - len(body)) // len(padding)) + body, encoding="utf-8"
    )
    assert load_file(path).data == {"flow": "x"}


def test_an_unreadable_path_is_a_diagnostic(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="cannot read file") as caught:
        load_file(tmp_path / "missing.yaml", "flows/missing.yaml")
    assert caught.value.diagnostic.format() == (
        "flows/missing.yaml:1:1: error BY001 cannot read file: No such file or directory"
    )


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF"])
def test_yaml_11_booleans_stay_strings(word: str) -> None:
    assert load_bytes(f"a: {word}\n{word}: 1\n".encode(), "x.yaml").data == {"a": word, word: 1}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("False", False),
        ("~", None),
        ("null", None),
        ("", None),
        ("12", 12),
        ("-3", -3),
        ("012", 12),
        ("0o17", 15),
        ("0x1F", 31),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("-.inf", -math.inf),
        ("1_000", "1_000"),
        ("2024-01-02", "2024-01-02"),
        ("12:30:00", "12:30:00"),
        ("0b101", "0b101"),
        ("'7'", "7"),
        ("!!str 7", "7"),
        ("!!float 1", 1.0),
        ("Norway", "Norway"),
    ],
)
def test_core_schema_scalars(text: str, value: object) -> None:
    assert load_bytes(f"a: {text}\n".encode(), "x.yaml").data == {"a": value}


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(min_size=1, max_size=12)
    | st.from_regex(r"[-+~.0-9a-zA-Z_:]{1,10}", fullmatch=True)
)
@example(text="null")
@example(text="Null")
@example(text="NULL")
@example(text="~")
@example(text="true")
@example(text="True")
@example(text="TRUE")
@example(text="false")
@example(text="False")
@example(text="FALSE")
@example(text=".inf")
@example(text="-.Inf")
@example(text="+.INF")
@example(text=".nan")
@example(text=".NaN")
@example(text="0x1F")
@example(text="0o7")
@example(text="+1")
@example(text="-1.5e3")
@example(text=".5")
@example(text="7")
def test_scalars_the_fast_path_keeps_as_text_are_text(text: str) -> None:
    """A plain scalar starting outside _NOT_TEXT_START is returned as text without a pattern tried:
    none of the core schema's nulls, booleans or number patterns may match such a text."""
    patterns = (load._INT, load._OCT, load._HEX, load._FLOAT, load._INF, load._NAN)
    resolves = text in load._NULLS | load._TRUE | load._FALSE or any(
        p.fullmatch(text) for p in patterns
    )
    # assume, not if: Hypothesis fails a test whose texts it almost never gets past this (a test of nothing)
    assume(text[0] not in load._NOT_TEXT_START)
    assert not resolves
    assert load._resolve_core(text) == text


def test_nan_is_a_float() -> None:
    assert math.isnan(load_bytes(b"a: .nan\n", "x.yaml").data["a"])


def test_keys_become_the_text_the_author_wrote() -> None:
    assert load_bytes(b"1: a\ntrue: b\nnull: c\n1.50: d\n", "x.yaml").data == {
        "1": "a",
        "true": "b",
        "null": "c",
        "1.50": "d",
    }


def test_every_value_and_key_keeps_its_position() -> None:
    doc = load_bytes(b"flow: x\nsteps:\n  - id: a\n    with: {n: 1, m: [2, 3]}\n", "x.yaml")
    assert doc.marks[("flow",)] == (1, 7)
    assert doc.marks[("steps", 0)] == (3, 5)
    assert doc.marks[("steps", 0, "with", "m", 1)] == (4, 25)
    assert doc.key_marks[("steps", 0, "with")] == (4, 5)
    assert doc.where(("steps", 0, "nothing", "here")) == (3, 5)
    assert doc.where(("steps", 0, "with", "n"), key=True) == (4, 12)


def test_aliases_within_limits_are_resolved() -> None:
    doc = load_bytes(b"a: &x {k: [1, 2]}\nb: *x\n", "x.yaml")
    assert doc.data == {"a": {"k": [1, 2]}, "b": {"k": [1, 2]}}


def test_byte_order_mark_and_document_markers_are_fine() -> None:
    assert load_bytes("\ufeff---\nflow: a\n...\n".encode(), "x.yaml").data == {"flow": "a"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7", 7),
        ("[1, 2]", [1, 2]),
        ("{a: 1}", {"a": 1}),
        ("yes", "yes"),
        ("", ""),
        ("a: b: c", "a: b: c"),
        ("!!python/object:os.system x", "!!python/object:os.system x"),
    ],
)
def test_parse_value_reads_cli_values_as_yaml(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    caught: list[LoadError] = []

    def attempt() -> None:
        with pytest.raises(
            LoadError, match=r"is a FIFO \(named pipe\), not a regular file"
        ) as raised:
            load_file(fifo, "flows/pipe.yaml")
        caught.append(raised.value)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # the old loader blocked in open(): give it a writer so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("load_file blocked on a FIFO")
    assert caught[0].diagnostic.format() == (
        "flows/pipe.yaml:1:1: error BY009 flows/pipe.yaml is a FIFO (named pipe), not a regular file; "
        "only regular files are read"
    )


def test_a_device_is_refused() -> None:
    # /dev/null rather than /dev/zero: the old loader would have read /dev/zero until memory ran out
    with pytest.raises(LoadError, match="is a character device, not a regular file") as caught:
        load_file(Path("/dev/null"), "flows/null.yaml")
    assert (caught.value.diagnostic.code, caught.value.diagnostic.message) == (
        "BY009",
        "flows/null.yaml is a character device, not a regular file; only regular files are read",
    )


def test_a_file_claiming_size_0_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    """/proc files report size 0 whatever they hold: the limit holds while reading, not from the size."""
    big = {f"BLOCKYARD_PAD_{n}": "x" * 100_000 for n in range(12)}  # environ of about 1.2 MB
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **big},
    )
    try:
        # running, environ in place
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        environ = Path(f"/proc/{child.pid}/environ")
        if not environ.exists():
            skip_or_fail("no /proc on this system")
        assert environ.stat().st_size == 0
        with pytest.raises(LoadError, match="file is more than 1024 KiB") as caught:
            load_file(environ, "flows/x.yaml")
    finally:
        child.communicate(b"")
    assert caught.value.diagnostic.format() == (
        f"flows/x.yaml:1:1: error BY001 file is more than {MAX_FILE_BYTES // 1024} KiB; definitions are limited to "
        f"{MAX_FILE_BYTES // 1024} KiB"
    )


def test_a_link_out_of_the_bounds_is_refused_unopened(tmp_path: Path) -> None:
    yard, outside = tmp_path / "yard", tmp_path / "outside.yaml"
    yard.mkdir()
    outside.write_text("secret_key: hunter2\n", encoding="utf-8")
    (yard / "x.yaml").symlink_to(outside)
    (yard / "inside.yaml").write_text("flow: x\n", encoding="utf-8")
    (yard / "alias.yaml").symlink_to("inside.yaml")
    bounds = Bounds.of(yard)
    assert load_file(yard / "alias.yaml", bounds=bounds).data == {"flow": "x"}
    assert load_file(yard / "x.yaml").data == {
        "secret_key": "hunter2"
    }  # no bounds: the caller's own choice
    with pytest.raises(LoadError, match="resolves outside the yard; it is not read") as caught:
        load_file(yard / "x.yaml", "flows/x.yaml", bounds=bounds)
    assert caught.value.diagnostic.format() == (
        "flows/x.yaml:1:1: error BY008 symbolic link flows/x.yaml resolves outside the yard; it is not read"
    )
