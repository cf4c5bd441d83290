"""Run-time type checks and coercion (engine/spec/typecheck.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.spec import TypeSpec
from engine.spec.typecheck import InputError, check_value, coerce_inputs, conform, outputs_schema


def spec(**data: Any) -> TypeSpec:
    return TypeSpec.model_validate(data)


@pytest.mark.parametrize(
    ("declared", "value", "expected"),
    [
        ({"type": "integer"}, 3, 3),
        ({"type": "integer"}, 3.0, 3),  # a whole float is an integer (JSON has one number type)
        ({"type": "number"}, 3, 3),  # an integer is a valid number
        ({"type": "number"}, 2.5, 2.5),
        ({"type": "string"}, "x", "x"),
        ({"type": "boolean"}, False, False),
        ({"type": "any"}, None, None),
        ({"type": "string", "default": None}, None, None),  # a null default makes null acceptable
        ({"type": "array", "items": {"type": "integer"}}, [1, 2.0], [1, 2]),
        ({"type": "array"}, (1, "a"), [1, "a"]),  # tuples become lists (state stays JSON-plain)
        (
            {"type": "object", "properties": {"q": {"type": "integer", "default": 1}}},
            {"x": 0},
            {"x": 0, "q": 1},
        ),
        ({"type": "string", "enum": ["a", "b"]}, "b", "b"),
    ],
)
def test_accepted_values(declared: dict[str, Any], value: Any, expected: Any) -> None:
    assert conform(value, spec(**declared)) == expected
    assert check_value(value, spec(**declared)) is None


@pytest.mark.parametrize(
    ("declared", "value", "message"),
    [
        ({"type": "integer"}, 2.5, "'value' must be an integer, got number 2.5"),
        ({"type": "integer"}, True, "'value' must be an integer, got boolean true"),
        ({"type": "number"}, "3", "'value' must be a number, got string '3'"),
        ({"type": "string"}, 7, "'value' must be a string, got integer 7"),
        ({"type": "boolean"}, "yes", "'value' must be a boolean, got string 'yes'"),
        ({"type": "string"}, None, "'value' must be a string, got null"),
        (
            {"type": "array", "items": {"type": "string"}},
            ["a", 1],
            "'value[1]' must be a string, got integer 1",
        ),
        (
            {"type": "array", "items": {"type": "string"}},
            "a",
            "'value' must be an array of strings, got string 'a'",
        ),
        ({"type": "object"}, [1], "'value' must be an object, got array of 1 item"),
        (
            {"type": "object", "properties": {"q": {"type": "integer"}}},
            {},
            "'value' is missing key 'q' (integer)",
        ),
        (
            {"type": "object", "properties": {"q": {"type": "integer"}}},
            {"q": "1"},
            "'value.q' must be an integer, got string '1'",
        ),
        ({"type": "string", "enum": ["a", "b"]}, "c", "'value' must be one of 'a', 'b', got 'c'"),
        ({"type": "integer", "enum": [1, 2]}, 3, "'value' must be one of 1, 2, got 3"),
    ],
)
def test_rejected_values(declared: dict[str, Any], value: Any, message: str | None) -> None:
    assert check_value(value, spec(**declared)) == message


def test_long_values_are_shortened_in_messages() -> None:
    message = check_value("x" * 100, spec(type="integer"), "n")
    assert message == "'n' must be an integer, got string '" + "x" * 36 + "..."


def test_coerce_inputs_applies_defaults_and_turns_command_line_numbers_into_text() -> None:
    declared = {
        "zip": spec(type="string"),
        "n": spec(type="integer", default=3),
        "tags": spec(type="array", default=[]),
    }
    values = coerce_inputs(declared, {"zip": 75001}, where="flow 'f'")
    assert values == {"zip": "75001", "n": 3, "tags": []}
    values["tags"].append("x")
    assert declared["tags"].default == []  # defaults are copied, never shared


def test_coerce_inputs_reports_every_problem_at_once() -> None:
    declared = {
        "name": spec(type="string"),
        "count": spec(type="integer"),
        "flag": spec(type="boolean", default=False),
    }
    with pytest.raises(InputError, match=r"^flow 'f': unknown input 'nmae'") as caught:
        coerce_inputs(declared, {"nmae": "Ada", "count": "0", "flag": "yes"}, where="flow 'f'")
    assert str(caught.value) == (
        "flow 'f': unknown input 'nmae' (did you mean 'name'?); its inputs are count, flag, name; "
        "missing input 'name' (string); input 'count' must be an integer, got string '0'; "
        "input 'flag' must be a boolean, got string 'yes'"
    )
    assert caught.value.exit_code == 2


def test_coerce_inputs_for_a_flow_without_inputs() -> None:
    with pytest.raises(InputError, match=r"^flow 'f': unknown input 'x'; it takes no inputs$"):
        coerce_inputs({}, {"x": 1}, where="flow 'f'")


def test_outputs_schema() -> None:
    outputs = {
        "choice": spec(type="string", enum=["yes", "no"], description="The decision."),
        "score": spec(type="number", default=0),
        "tags": spec(type="array", items=spec(type="string")),
        "meta": spec(type="object", properties={"k": spec(type="integer")}),
        "raw": spec(type="any"),
    }
    assert outputs_schema(outputs) == {
        "type": "object",
        "properties": {
            "choice": {"type": "string", "description": "The decision.", "enum": ["yes", "no"]},
            "score": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
            "raw": {},
        },
        "required": ["choice", "tags", "meta", "raw"],
        "additionalProperties": False,
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "any"])


@given(value=JSON, kind=TYPES)
def test_conform_is_idempotent_and_agrees_with_check_value(value: Any, kind: str) -> None:
    declared = spec(type=kind)
    problem = check_value(value, declared)
    if problem is None:
        once = conform(value, declared)
        assert conform(once, declared) == once
        assert check_value(once, declared) is None
    else:
        assert problem.startswith("'value' ")
