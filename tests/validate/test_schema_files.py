"""The published JSON Schemas: no drift from the spec models, documented, valid, and used by the examples."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from engine.spec.export import BASE_ID, SCHEMAS, render
from engine.starter import FILES, SCHEMA_URL
from engine.validate.schema import schema_dir

REPO = Path(__file__).resolve().parents[2]


def test_the_validator_reads_the_committed_schemas() -> None:
    assert schema_dir() == REPO / "schemas"


@pytest.mark.parametrize("filename", sorted(SCHEMAS))
def test_committed_schema_matches_the_models(filename: str) -> None:
    committed = (REPO / "schemas" / filename).read_text(encoding="utf-8")
    assert committed == render(SCHEMAS[filename], filename), (
        f"schemas/{filename} is stale: run `python -m engine.spec.export` and commit schemas/")


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
    undocumented = [where for where, prop in _properties(schema, filename)
                    if not (isinstance(prop, dict) and prop.get("description"))]
    assert undocumented == []


@pytest.mark.parametrize("filename", sorted(SCHEMAS))
def test_schema_is_valid_draft_2020_12(filename: str) -> None:
    schema = json.loads((REPO / "schemas" / filename).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == BASE_ID + filename


def _examples() -> list[Path]:
    return sorted(p for folder in ("blocks", "flows") for p in (REPO / folder).rglob("*.y*ml")
                  if not p.name.endswith((".test.yaml", ".test.yml")))


@pytest.mark.parametrize("path", _examples(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_files_name_their_schema_for_editors(path: Path) -> None:
    kind = "block" if path.relative_to(REPO).parts[0] == "blocks" else "flow"
    depth = "../" * (len(path.relative_to(REPO).parts) - 1)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"# yaml-language-server: $schema={depth}schemas/{kind}.schema.json"


def test_starter_files_point_at_the_published_schemas() -> None:
    kinds = {"blockyard.yaml": "config", "blocks/greet.yaml": "block", "flows/hello.yaml": "flow"}
    for name, text in FILES.items():
        url = SCHEMA_URL.format(name=kinds[name])
        assert text.splitlines()[0] == f"# yaml-language-server: $schema={url}"
        assert url == BASE_ID + f"{kinds[name]}.schema.json"
