"""`schema_verdict` (engine/spec/typecheck.py) decides what jsonschema decides for the schemas blocks' outputs
make, on a corpus of generated declarations and values: the quick check a model's reply gets at every
llm step, without importing jsonschema (issue 15, cold start)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from engine.spec import TypeSpec
from engine.spec.typecheck import outputs_schema, schema_verdict, type_schema

NAMES = st.sampled_from(["a", "b", "name", "n", "items", "type"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 2.5, -1.0, 1e300]),
    st.sampled_from(["", "x", "1", "true", "a"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=3)),
    max_leaves=8,
)
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "any"])


ENUMS = st.none() | st.lists(SCALARS | st.lists(SCALARS, max_size=2), min_size=1, max_size=3)


def _declared(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    """A declaration as a block writes it (`type`, `enum`, `items`, `properties`, `default`, `description`).
    `items` and `properties` are drawn only for the types that have them: drawing (and throwing away) the
    nested declarations of the others took most of this test's time."""
    inner = _declared(depth - 1) if depth > 0 else st.none()
    items = st.none() | inner
    props = st.none() | st.dictionaries(NAMES, inner, max_size=3) if depth > 0 else st.none()

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        kind = draw(TYPES)
        spec: dict[str, Any] = {"type": kind}
        enum = draw(ENUMS)
        if enum is not None:
            spec["enum"] = enum
        if draw(st.booleans()):
            spec["default"] = None
        if draw(st.booleans()):
            spec["description"] = "what it means"
        if kind == "array":
            nested = draw(items)
            if nested is not None:
                spec["items"] = nested
        if kind == "object":
            properties = draw(props)
            if properties:
                spec["properties"] = properties
        return spec

    return build()


# built once: a strategy built anew at every draw costs hypothesis its checks again
DECLARED = _declared(2)
OUTPUTS = st.dictionaries(NAMES, DECLARED, min_size=1, max_size=3)  # the same
FITTING: dict[
    str, st.SearchStrategy[Any]
] = {}  # _fitting's strategies by repr(schema), for the same reason


def _fitting(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values shaped like the schema (so valid ones are common), with wrong pieces mixed in."""
    key = repr(schema)
    if key not in FITTING:
        FITTING[key] = _fitting_anew(schema)
    return FITTING[key]


def _fitting_anew(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | JSON
    if kind == "array":
        return st.lists(_fitting(schema.get("items", {})), max_size=3) | JSON
    if kind == "object":
        props = schema.get("properties", {})
        fixed = st.fixed_dictionaries(
            {}, optional={key: _fitting(sub) for key, sub in props.items()}
        )
        return fixed | st.dictionaries(NAMES, JSON, max_size=3)
    return {
        "string": st.text(max_size=3),
        "integer": st.integers(),
        "number": st.floats(allow_nan=True),
        "boolean": st.booleans(),
    }.get(kind or "", JSON) | JSON


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    outputs = draw(OUTPUTS)
    schema = outputs_schema({key: TypeSpec.model_validate(spec) for key, spec in outputs.items()})
    if draw(st.booleans()):
        schema = type_schema(TypeSpec.model_validate(draw(DECLARED)))
    return schema, draw(_fitting(schema))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_verdict_is_jsonschemas_for_every_schema_typecheck_makes(
    case: tuple[dict[str, Any], Any],
) -> None:
    schema, value = case
    verdict = schema_verdict(value, schema)
    assert verdict is not None, (
        schema,
        value,
    )  # typecheck's schemas and JSON values are all covered
    assert verdict is Draft202012Validator(schema).is_valid(value), (schema, value)


def test_jsonschemas_corners_are_kept() -> None:
    integer, number = {"type": "integer"}, {"type": "number"}
    # Draft 4 and later
    assert schema_verdict(3.0, integer) is True and schema_verdict(3.5, integer) is False
    assert schema_verdict(True, integer) is False and schema_verdict(True, number) is False
    assert schema_verdict(math.inf, integer) is False and schema_verdict(math.nan, number) is True
    assert (
        schema_verdict(1, {"enum": [True]}) is False
        and schema_verdict(True, {"enum": [1, True]}) is True
    )
    assert (
        schema_verdict(1.0, {"enum": [1]}) is True
        and schema_verdict([1], {"enum": [[True]]}) is False
    )
    assert schema_verdict(
        {"a": 1}, {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    )
    assert schema_verdict({"b": 1}, {"type": "object", "additionalProperties": False}) is False
    assert schema_verdict({}, {"type": "object", "required": ["a"]}) is False


def test_what_it_does_not_cover_is_left_to_jsonschema() -> None:
    # a keyword it does not know
    assert schema_verdict("x", {"type": "string", "pattern": "^x$"}) is None
    assert schema_verdict("x", {"type": ["string", "null"]}) is None
    assert schema_verdict((1, 2), {"type": "array"}) is None  # not a JSON value's Python type
    assert schema_verdict({"a": 1}, {"properties": {"a": {"minimum": 0}}}) is None
    assert schema_verdict({"a": 1}, {"additionalProperties": {"type": "integer"}}) is None
