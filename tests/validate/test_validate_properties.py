"""Property-based tests: whatever the input, validation ends in collected diagnostics or a clean pass.

Never an exception, never a position outside the file, never a code missing from the registry.
Inputs: random text and bytes (raw and built from YAML punctuation), and random mutations of the
valid example yards (keys deleted or renamed, values retyped, step ids swapped, steps duplicated).
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.diagnostics import Diagnostic
from engine.definitions import schema
from engine.definitions.load import LoadError, load_bytes
from engine.validate.codes import all_codes
from engine.validate.command import validate

REPO = Path(__file__).resolve().parents[2]
YARDS = [REPO, *sorted(p for p in (REPO / "tests" / "examples" / "valid").iterdir() if p.is_dir())]
# BLOCKYARD_EXAMPLES=2000 hunts harder; the default keeps this file at a few seconds
EXAMPLES = int(os.environ.get("BLOCKYARD_EXAMPLES", "60"))
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _snapshot(yard: Path) -> dict[str, bytes]:
    """The yard's definition files, read once: data generation must not see files change under it."""
    parts = (
        ["blocks", "flows", "blockyard.yaml"] if yard == REPO else [p.name for p in yard.iterdir()]
    )
    found: dict[str, bytes] = {}
    for part in parts:
        paths = [yard / part] if (yard / part).is_file() else sorted((yard / part).rglob("*.y*ml"))
        found.update(
            {
                p.relative_to(yard).as_posix(): p.read_bytes()
                for p in paths
                if p.suffix in (".yaml", ".yml")
            }
        )
    return found


SNAPSHOTS = {yard.name or "repo": _snapshot(yard) for yard in YARDS}
YAML_PIECES = [
    "flow",
    "steps",
    "id",
    ":",
    " ",
    "  ",
    "\n",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "&a ",
    "*a",
    "!!str ",
    "!tag ",
    "'",
    '"',
    "#",
    "---\n",
    "...\n",
    "? ",
    "|\n",
    ">-\n",
    "<<",
    "~",
    "yes",
    "1e3",
    "0x1F",
    "\t",
    "%YAML 1.2\n",
    "\\",
    "é",
    "{{ x }}",
    "uses",
    "with",
]
TRICKY = st.sampled_from(
    [
        "3",
        "1.5",
        1.0,
        0,
        -1,
        True,
        "5s\n",
        "name\n",
        "a b",
        "",
        "end",
        "fail",
        "llm",
        [],
        {},
        {"type": "string"},
        "{{ x }}",
        "10m",
        1e300,
    ]
)
JSON_VALUES = st.recursive(
    TRICKY
    | st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _check_document(raw: bytes) -> None:
    try:
        doc = load_bytes(raw, "x.yaml")
    except LoadError as exc:
        _assert_sane([exc.diagnostic], raw)
        return
    for kind in ("block", "flow", "config"):
        _assert_sane(schema.check(doc, kind), raw)


def _assert_sane(diagnostics: list[Diagnostic], raw: bytes | None = None) -> None:
    for d in diagnostics:
        assert isinstance(d, Diagnostic)
        assert d.code in all_codes(), d.format()
        assert d.severity in ("error", "warning")
        assert d.line >= 1 and d.col >= 1, d.format()
        if raw is not None:
            # libyaml also breaks lines at CR, NEL, LS and PS; str.splitlines knows all of those
            assert d.line <= len(raw.decode("utf-8", "replace").splitlines()) + 1, d.format()
        assert d.message and not any(ch in d.message for ch in "\r\n\x85\u2028\u2029"), d.format()


@FAST
@given(st.text(max_size=300))
def test_random_text_never_raises(text: str) -> None:
    _check_document(text.encode("utf-8", "surrogatepass"))


@FAST
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(raw: bytes) -> None:
    _check_document(raw)


@FAST
@given(st.lists(st.sampled_from(YAML_PIECES), max_size=60).map("".join))
def test_yaml_shaped_noise_never_raises(text: str) -> None:
    _check_document(text.encode("utf-8"))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


def _steps(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if "id" in value:
            yield value
        for item in value.values():
            yield from _steps(item)
    elif isinstance(value, list):
        for item in value:
            yield from _steps(item)


def _mutate(data: Any, draw: st.DataObject) -> Any:
    paths = [p for p in _paths(data) if p]
    path = draw.draw(st.sampled_from(paths))
    parent = _parent(data, path)
    operation = draw.draw(
        st.sampled_from(["delete", "rename", "python_name", "retype", "swap_ids", "duplicate"])
    )
    if operation == "delete":
        del parent[path[-1]]
    elif operation == "python_name" and isinstance(parent, dict) and isinstance(path[-1], str):
        # the models' own field names for YAML keys that are Python keywords must stay unknown keys
        parent[
            {"with": "with_", "as": "as_", "import": "import_"}.get(path[-1], path[-1] + "_")
        ] = parent.pop(path[-1])
    elif operation == "rename" and isinstance(parent, dict):
        parent[draw.draw(st.text(min_size=1, max_size=10))] = parent.pop(path[-1])
    elif operation == "swap_ids":
        steps = list(_steps(data))
        if len(steps) >= 2:
            first, second = draw.draw(st.permutations(steps))[:2]
            first["id"], second["id"] = second["id"], first["id"]
    elif operation == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[path[-1]]))
    else:
        parent[path[-1]] = draw.draw(JSON_VALUES)
    return data


@settings(
    max_examples=EXAMPLES + EXAMPLES // 3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_mutated_yards_give_diagnostics_or_pass(data: st.DataObject) -> None:
    source = data.draw(st.sampled_from(sorted(SNAPSHOTS)), label="yard")
    files = SNAPSHOTS[source]
    victim = data.draw(
        st.sampled_from([name for name in files if ".test." not in name]), label="file"
    )
    document = yaml.safe_load(files[victim].decode("utf-8"))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        if isinstance(document, dict | list) and document:
            document = _mutate(document, data)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "yard"
        for name, content in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(content)
        (root / victim).write_text(
            yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8"
        )
        report = validate([], root)
    _assert_sane(report.diagnostics)
    # the schema is generated from the models, so what passes the schema must build a spec
    assert "BY100" not in {d.code for d in report.diagnostics}, [
        d.format() for d in report.diagnostics
    ]


def _kind(name: str) -> str | None:
    if name == "blockyard.yaml":
        return "config"
    return {"blocks": "block", "flows": "flow"}.get(name.split("/")[0])


def _documents() -> list[tuple[str, str]]:
    """(schema name, text) of every definition in the snapshots."""
    return [
        (kind, content.decode("utf-8"))
        for files in SNAPSHOTS.values()
        for name, content in files.items()
        if ".test." not in name and (kind := _kind(name)) is not None
    ]


DOCUMENTS = _documents()


@settings(max_examples=EXAMPLES * 4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_fast_path_never_accepts_what_the_schema_rejects(data: st.DataObject) -> None:
    kind, text = data.draw(st.sampled_from(DOCUMENTS), label="document")
    document = yaml.safe_load(text)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        if isinstance(document, dict | list) and document:
            document = _mutate(document, data)
    spec = schema.accepted(document, kind)
    if spec is not None:
        assert [e.message for e in schema._validator(kind).iter_errors(document)] == []
        # the loader keeps the fast path's spec: it must be the one the lax build makes
        lax = schema.MODELS[kind].validate_python(document)
        assert spec == lax and spec.model_dump(by_alias=True) == lax.model_dump(by_alias=True)


def test_the_fast_path_is_in_use() -> None:
    assert schema.is_valid(
        {"flow": "x", "steps": [{"id": "a", "uses": "b", "with": {"t": 1}}]}, "flow"
    )
    assert not schema.is_valid(
        {"flow": "x", "steps": [{"id": "a", "uses": "b", "with_": {"t": 1}}]}, "flow"
    )
