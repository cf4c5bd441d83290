"""The published JSON Schemas: no drift from the spec models, documented, valid, and used by the examples."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from engine.cli.starter import FILES, init_command
from engine.definitions.schema import schema_dir
from engine.spec.export import BASE_ID, SCHEMAS, render

REPO = Path(__file__).resolve().parents[2]


def test_the_validator_reads_the_committed_schemas() -> None:
    assert schema_dir() == REPO / "schemas"


@pytest.mark.parametrize("filename", sorted(SCHEMAS))
def test_committed_schema_matches_the_models(filename: str) -> None:
    committed = (REPO / "schemas" / filename).read_text(encoding="utf-8")
    assert committed == render(SCHEMAS[filename], filename), (
        f"schemas/{filename} is stale: run `python -m engine.spec.export` and commit schemas/"
    )


def test_no_stray_schema_files() -> None:
    assert sorted(p.name for p in (REPO / "schemas").glob("*.json")) == sorted(SCHEMAS)


def _properties(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, prop in value.items():
                    yield f"{where}.{name}", prop
                    yield from _properties(prop, f"{where}.{name}")
            else:
                yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _properties(item, f"{where}[{index}]")


@pytest.mark.parametrize("filename", sorted(SCHEMAS))
def test_every_property_has_a_description(filename: str) -> None:
    schema = json.loads((REPO / "schemas" / filename).read_text(encoding="utf-8"))
    undocumented = [
        where
        for where, prop in _properties(schema, filename)
        if not (isinstance(prop, dict) and prop.get("description"))
    ]
    assert undocumented == []


@pytest.mark.parametrize("filename", sorted(SCHEMAS))
def test_schema_is_valid_draft_2020_12(filename: str) -> None:
    schema = json.loads((REPO / "schemas" / filename).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == BASE_ID + filename


def _examples() -> list[Path]:
    return sorted(
        p
        for folder in ("blocks", "flows")
        for p in (REPO / folder).rglob("*.y*ml")
        if not p.name.endswith((".test.yaml", ".test.yml"))
    )


@pytest.mark.parametrize("path", _examples(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_files_name_their_schema_for_editors(path: Path) -> None:
    kind = "block" if path.relative_to(REPO).parts[0] == "blocks" else "flow"
    depth = "../" * (len(path.relative_to(REPO).parts) - 1)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"# yaml-language-server: $schema={depth}schemas/{kind}.schema.json"


def test_starter_files_name_their_schema_by_relative_path() -> None:
    kinds = {"blockyard.yaml": "config", "blocks/greet.yaml": "block", "flows/hello.yaml": "flow"}
    assert set(FILES) == set(kinds)
    for name, text in FILES.items():
        depth = "../" * name.count("/")
        assert (
            text.splitlines()[0]
            == f"# yaml-language-server: $schema={depth}schemas/{kinds[name]}.schema.json"
        )


def test_init_writes_schemas_that_resolve_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every $schema line of a fresh yard names, relative to its file, a file equal to the shipped schema."""
    assert init_command(tmp_path / "yard") == 0
    capsys.readouterr()
    shipped = {path.name: path.read_bytes() for path in schema_dir().glob("*.schema.json")}
    assert sorted(shipped) == sorted(SCHEMAS)
    for name in FILES:
        path = tmp_path / "yard" / name
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema=")
        target = first.partition("$schema=")[2]
        assert "://" not in target
        resolved = (path.parent / target).resolve()
        assert resolved.is_relative_to((tmp_path / "yard").resolve())
        assert resolved.read_bytes() == shipped[resolved.name]
        schema = json.loads(resolved.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
    assert {p.name: p.read_bytes() for p in (tmp_path / "yard" / "schemas").iterdir()} == shipped


def test_init_keeps_a_schema_that_is_already_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "flow.schema.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "schemas" / "block.schema.json").symlink_to(tmp_path / "elsewhere.json")
    assert init_command(tmp_path) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "schemas" / "flow.schema.json").read_text(encoding="utf-8") == "{}\n"
    assert not (tmp_path / "elsewhere.json").exists()  # nothing is written through a link
    assert "schemas/config.schema.json" in out and "schemas/flow.schema.json" not in out
