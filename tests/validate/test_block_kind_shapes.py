"""One shape per block kind: each kind is a pydantic model of its own (engine/spec/block.py, the `BlockSpec`
union keyed by `kind`), and the published schema has one branch per kind (engine/spec/export.py,
`kind_branches`), from the tables computed from the models (`KIND_REQUIRES`, `KIND_KEYS`). An editor and
the models refuse a `tool` block without `tool:` by shape, while `blockyard validate` keeps its codes and
words (BY350-BY358, BY356) for the same rules. Each row of the tables is checked every way, so that the
models, the schema and the validator cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from engine.cli.starter import FILES
from engine.definitions import schema
from engine.definitions.project import load_project
from engine.spec.block import BLOCK_KINDS, BLOCK_MODELS, KIND_KEYS, KIND_REQUIRES, parse_block
from engine.validate.semantic import check_project

MakeYard = Callable[[dict[str, str]], Path]
REPO = Path(__file__).resolve().parents[2]
PUBLISHED = Draft202012Validator(
    json.loads((REPO / "schemas" / "block.schema.json").read_text(encoding="utf-8"))
)

# a smallest right block of each kind
RIGHT: dict[str, dict[str, Any]] = {
    "llm": {"prompt": {"user": "Say hi."}, "outputs": {"text": {"type": "string"}}},
    "decide": {
        "prompt": {"user": "Yes or no?"},
        "outputs": {"choice": {"type": "string", "enum": ["yes", "no"]}},
    },
    "agent": {"prompt": {"user": "Find it."}, "outputs": {"answer": {"type": "string"}}},
    "smart": {
        "inputs": {"question": {"type": "string"}},
        "outputs": {"answer": {"type": "string"}},
    },
    "tool": {"tool": "current_time"},
    "transform": {
        "inputs": {"n": {"type": "integer"}},
        "outputs": {"m": {"type": "integer"}},
        "compute": {"m": "n"},
    },
    "memory_read": {"memory": {"key": "k"}, "outputs": {"value": {"type": "any"}}},
    "memory_write": {"inputs": {"value": {"type": "any"}}, "memory": {"key": "k"}},
    "wait": {"duration": "1s"},
}
# the code `blockyard validate` reports a missing key with, by kind and key
MISSING = {
    ("tool", "tool"): "BY351",
    ("wait", "duration"): "BY352",
    ("memory_read", "memory"): "BY355",
    ("memory_write", "memory"): "BY355",
    ("transform", "compute"): "BY350",
    ("decide", "outputs"): "BY353",
}
TOOLS: dict[str, str] = {}
# a value each kind-bound key may take where it applies
SOME: dict[str, Any] = {
    "prompt": {"user": "Hi."},
    "model": "default",
    "tools": ["current_time"],
    "delegates": ["x"],
    "max_iterations": 3,
    "approve_tools": {"current_time": ["approve"]},
    "mode": "predict",
    "guardrails": {"max_length": 10},
    "compute": {"m": "1"},
    "tool": "current_time",
    "duration": "1s",
    "memory": {"key": "k"},
    "history": 5,
}


def _block(kind: str, **changes: Any) -> dict[str, Any]:
    block = {"block": "b", "kind": kind, **RIGHT[kind], **changes}
    return {key: value for key, value in block.items() if value is not ...}


def _codes(make_yard: MakeYard, block: dict[str, Any]) -> list[str]:
    root = make_yard({"blocks/b.yaml": yaml.safe_dump(block), **TOOLS})
    project = load_project(root)
    return [d.code for d in [*project.diagnostics, *check_project(project)]]


@pytest.mark.parametrize("kind", BLOCK_KINDS)
def test_each_kind_is_a_model_of_its_own(kind: str) -> None:
    spec = parse_block(_block(kind))
    assert type(spec) is BLOCK_MODELS[kind] and spec.kind == kind


def test_a_kind_s_keys_are_its_model_s_shape() -> None:
    with pytest.raises(ValidationError, match="Field required") as missing:
        parse_block(_block("tool", tool=...))
    assert [(e["type"], e["loc"]) for e in missing.value.errors()] == [
        ("missing", ("tool", "tool"))
    ]
    with pytest.raises(ValidationError, match="Extra inputs are not permitted") as foreign:
        parse_block(_block("tool", prompt={"user": "hi"}))
    assert [(e["type"], e["loc"]) for e in foreign.value.errors()] == [
        ("extra_forbidden", ("tool", "prompt"))
    ]
    # a key of another kind left empty says nothing (as the published schema allows it)
    assert not hasattr(parse_block(_block("tool", tools=[], prompt=None)), "prompt")


def test_every_kind_has_its_right_block() -> None:
    assert sorted(RIGHT) == sorted(BLOCK_KINDS) and set(KIND_REQUIRES) <= set(BLOCK_KINDS)
    assert sorted(SOME) == sorted(KIND_KEYS)


@pytest.mark.parametrize("kind", BLOCK_KINDS)
def test_a_right_block_of_each_kind_passes_both(make_yard: MakeYard, kind: str) -> None:
    assert list(PUBLISHED.iter_errors(_block(kind))) == []
    assert _codes(make_yard, _block(kind)) == []


@pytest.mark.parametrize(
    ("kind", "key"), [(kind, key) for kind, keys in KIND_REQUIRES.items() for key in keys]
)
def test_a_missing_required_key_is_refused_by_shape_and_by_its_code(
    make_yard: MakeYard, kind: str, key: str
) -> None:
    block = _block(kind, **{key: ...})
    assert not PUBLISHED.is_valid(block), f"the schema takes {kind} without {key}"
    expected = MISSING.get((kind, key), {"prompt": "BY354", "outputs": "BY358"}.get(key))
    codes = _codes(make_yard, block)
    assert expected in codes
    # the validator's own schema stage leaves the branches to the kind's model, whose errors it words with
    # the kind's codes: no generic schema error (BY1xx)
    assert schema._validator("block").is_valid(block) and not [
        code for code in codes if code.startswith("BY1")
    ]


@pytest.mark.parametrize(
    ("kind", "key"),
    [
        (kind, key)
        for key, kinds in KIND_KEYS.items()
        for kind in BLOCK_KINDS
        if kind not in kinds and key not in RIGHT[kind]
    ],
)
def test_a_key_of_another_kind_is_refused_by_shape_and_as_bys356(
    make_yard: MakeYard, kind: str, key: str
) -> None:
    value = SOME[key]
    block = _block(kind, **{key: value})
    assert not PUBLISHED.is_valid(block), f"the schema takes `{key}` on {kind}"
    assert "BY356" in _codes(make_yard, block)


def test_an_empty_or_null_key_of_another_kind_is_ignored_by_both(make_yard: MakeYard) -> None:
    block = _block("llm", tools=[], tool=None)
    assert PUBLISHED.is_valid(block)
    assert _codes(make_yard, block) == []


def test_every_block_of_the_example_yard_and_the_starter_fits_its_kind() -> None:
    # the example yard is the repository's own (blocks/, flows/, blockyard.yaml), and examples/ holds more
    files = [
        *sorted((REPO / "blocks").glob("*.yaml")),
        *sorted((REPO / "examples").glob("*/blocks/*.yaml")),
    ]
    texts = [path.read_text(encoding="utf-8") for path in files]
    texts += [text for name, text in FILES.items() if name.startswith("blocks/")]
    assert len(texts) >= 5, "no example blocks found"
    for text in texts:
        block = yaml.safe_load(text)
        assert [error.message for error in PUBLISHED.iter_errors(block)] == [], block.get("block")


# ---- steps: one action each, and the keys only some actions read ---------------------------------------

FLOW_SCHEMA = Draft202012Validator(
    json.loads((REPO / "schemas" / "flow.schema.json").read_text(encoding="utf-8"))
)
INC = (
    "block: inc\nkind: transform\ninputs: {n: {type: integer, default: 0}}\noutputs: {n: {type: integer}}\n"
    "compute: {n: n + 1}\n"
)


def _flow(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"flow": "f", "steps": [{"id": "a", "uses": "inc"}, *steps]}


def _flow_codes(make_yard: MakeYard, flow: dict[str, Any]) -> list[str]:
    root = make_yard({"blocks/inc.yaml": INC, "flows/f.yaml": yaml.safe_dump(flow)})
    project = load_project(root)
    return [d.code for d in [*project.diagnostics, *check_project(project)]]


ROUTER = {"value": "x", "routes": [], "default": "end"}


@pytest.mark.parametrize(
    ("step", "code"),
    [
        ({"id": "b", "uses": "inc", "router": ROUTER}, "BY301"),
        ({"id": "b"}, "BY300"),
        ({"id": "b", "router": ROUTER, "with": {"n": 1}}, "BY317"),
        (
            {
                "id": "b",
                "loop": {"max_iterations": 2, "steps": [{"id": "c", "uses": "inc"}]},
                "outputs": {"n": "m"},
            },
            "BY317",
        ),
    ],
)
def test_a_step_s_shape_is_refused_by_the_schema_and_by_its_code(
    make_yard: MakeYard, step: dict[str, Any], code: str
) -> None:
    flow = _flow(step)
    assert not FLOW_SCHEMA.is_valid(flow)
    codes = _flow_codes(make_yard, flow)
    assert code in codes and not [found for found in codes if found.startswith("BY1")]
    # the validator's schema stage: the models' shape
    assert schema._validator("flow").is_valid(flow)


def test_steps_of_each_action_with_their_own_keys_pass_both(make_yard: MakeYard) -> None:
    flow = _flow(
        {"id": "b", "uses": "inc", "with": {"n": 2}, "outputs": {"n": "m"}},
        {"id": "r", "router": ROUTER},
    )
    assert [error.message for error in FLOW_SCHEMA.iter_errors(flow)] == []
    assert _flow_codes(make_yard, flow) == []


def test_every_flow_of_the_example_yard_fits_the_step_shapes() -> None:
    files = [
        path
        for path in [
            *sorted((REPO / "flows").glob("*.yaml")),
            *sorted((REPO / "examples").glob("*/flows/*.yaml")),
        ]
        if not path.name.endswith(".test.yaml")
    ]  # flow tests have a schema of their own
    assert len(files) >= 5, "no example flows found"
    for path in files:
        flow = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert [error.message for error in FLOW_SCHEMA.iter_errors(flow)] == [], path.name
