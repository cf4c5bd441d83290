"""The mock's fake values are valid against every schema blocks can declare."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from engine.models.mock_values import fake, seed_of, summarize

_SCALAR_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {},
    {"type": "string", "enum": ["a", "b", "c"]},
    {"type": "integer", "enum": [1, 5]},
    {"type": "integer", "minimum": 3, "maximum": 7},
    {"type": "number", "minimum": -2},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
    {"type": "string", "minLength": 40},
    {"type": "string", "maxLength": 3},
    {"type": "string", "format": "date-time"},
    {"type": ["string", "null"]},
    {"type": "integer", "multipleOf": 5, "minimum": 1},
    {"type": "number", "multipleOf": 0.5},
    {"const": "fixed"},
    {"anyOf": [{"type": "integer"}, {"type": "null"}]},
]
SCALARS = st.sampled_from(_SCALAR_SCHEMAS)
NAMES = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    def extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        # unique arrays stay short: "3 unique booleans" is a schema nothing satisfies
        arrays = st.builds(
            lambda item, low, unique: (
                {"type": "array", "items": item, "minItems": min(low, 1), "uniqueItems": True}
                if unique
                else {"type": "array", "items": item, "minItems": low}
            ),
            children,
            st.integers(0, 3),
            st.booleans(),
        )
        objects = st.dictionaries(NAMES, children, max_size=4).map(
            lambda props: {
                "type": "object",
                "properties": props,
                "required": sorted(props),
                "additionalProperties": False,
            }
        )
        return arrays | objects

    return st.recursive(SCALARS, extend, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(
    schema=schemas(),
    inputs=st.dictionaries(NAMES, st.integers() | st.text(max_size=30), max_size=3),
)
def test_fake_values_validate(schema: dict[str, Any], inputs: dict[str, Any]) -> None:
    value = fake(schema, seed=seed_of("blk", inputs), label="blk: " + summarize(inputs))
    errors = list(Draft202012Validator(schema).iter_errors(value))
    assert not errors, (schema, value, errors[0].message)
    assert value == fake(schema, seed=seed_of("blk", inputs), label="blk: " + summarize(inputs))


def test_unique_enum_arrays_stay_unique() -> None:
    schema = {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 2, "uniqueItems": True}
    value = fake(schema, seed="s", label="l")
    assert sorted(value) == ["x", "y"]


def test_local_refs_are_followed() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/point"}},
        "required": ["p"],
        "$defs": {
            "point": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
        },
    }
    value = fake(schema, seed="s", label="l")
    assert isinstance(value["p"]["x"], int)


@pytest.mark.parametrize(
    ("inputs", "text"),
    [
        ({}, "no inputs"),
        ({"b": [1, 2], "a": "x"}, "a=x, b=[2 items]"),
        ({"d": {"k1": 1, "k2": 2, "k3": 3, "k4": 4}}, "d={k1,k2,k3,...}"),
        ({"t": "x" * 40}, "t=" + "x" * 21 + "..."),
        ({"n": None, "f": 1.5, "ok": True}, "f=1.5, n=null, ok=true"),
    ],
)
def test_summaries(inputs: dict[str, Any], text: str) -> None:
    assert summarize(inputs) == text


def test_long_summaries_are_cut() -> None:
    text = summarize({f"k{i}": "value" for i in range(20)})
    assert len(text) == 80
    assert text.endswith("...")
