"""Run-time checks of values against declared types (block inputs and outputs, flow inputs).

Rules (docs/compiler.md, "Type checks"):
- `any` accepts everything, null included;
- null is accepted only by `any`, or where the declared default is null;
- `integer` accepts whole numbers; a float with no fractional part (3.0) becomes 3; booleans
  are not numbers;
- `number` accepts integers and floats;
- `string` accepts text only — except flow inputs (`coerce_inputs`), where a number given on the
  command line (`--input zip=75001`) becomes its text;
- `boolean` accepts true/false only (YAML 1.2: `yes` stays the string 'yes');
- `array` checks every item against `items`; `object` checks its declared `properties` (a
  declared key without a default must be present; other keys are allowed) and fills defaults;
- `enum` is checked after the type.

No LangGraph here: the validator and the CLI import this module.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError
from engine.core.values import JsonDict, JsonValue, int_problem, text_problem, value_problem
from engine.spec import TypeSpec

_ARTICLE = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
}


class TypeMismatch(ValueError):
    """A value that does not fit its declared type; the message names where (e.g. 'lines[2].qty')."""


class InputError(UsageError):
    """Flow inputs that do not match the flow's declared inputs (unknown, missing or mistyped)."""


def conform(
    value: Any, spec: TypeSpec, name: str = "value", *, text_from_numbers: bool = False
) -> Any:
    """`value` made to fit `spec` (see the module rules), or TypeMismatch naming `name`."""
    if value is None:
        if spec.type == "any" or (spec.has_default and spec.default is None):
            return None
        raise TypeMismatch(f"'{name}' must be {_expected(spec)}, got null")
    result = _conform_type(value, spec, name, text_from_numbers)
    if spec.enum is not None and result not in spec.enum:
        choices = ", ".join(_show(choice) for choice in spec.enum)
        raise TypeMismatch(f"'{name}' must be one of {choices}, got {_show(result)}")
    return result


def check_value(value: Any, spec: TypeSpec, name: str = "value") -> str | None:
    """None when `value` fits `spec`, else what is wrong, e.g. "'qty' must be an integer, got string 'x'"."""
    try:
        conform(value, spec, name)
    except TypeMismatch as exc:
        return str(exc)
    return None


def coerce_inputs(
    declared: Mapping[str, TypeSpec], given: Mapping[str, Any], *, where: str
) -> JsonDict:
    """A flow's inputs from what the caller gave: defaults applied, every value checked.

    Unknown keys (with a did-you-mean), missing required inputs, mistyped values and values
    outside the value domain (engine/core/values.py: integers beyond 64 bits, lone surrogates) are all
    reported at once in one InputError whose message starts with `where` (e.g. "flow 'hello'").
    """
    problems: list[str] = []
    result: JsonDict = {}
    for key in given:
        if not isinstance(key, str) or text_problem(key) is not None:
            problems.append(f"input name {key!r} is not valid text")
        elif key not in declared:
            known = (
                f"; its inputs are {', '.join(sorted(declared))}"
                if declared
                else "; it takes no inputs"
            )
            problems.append(f"unknown input '{key}'{did_you_mean(key, declared)}{known}")
    for key, spec in declared.items():
        if key in given:
            problem = value_problem(given[key], key)  # first: str() of a 5000-digit integer raises
            if problem is not None:
                problems.append(f"input {problem}")
                continue
            try:
                result[key] = conform(given[key], spec, key, text_from_numbers=True)
            except TypeMismatch as exc:
                problems.append(f"input {exc}")
        elif spec.has_default:
            result[key] = copy.deepcopy(spec.default)
        else:
            problems.append(f"missing input '{key}' ({spec.type})")
    if problems:
        raise InputError(f"{where}: " + "; ".join(problems))
    return result


def outputs_schema(outputs: Mapping[str, TypeSpec]) -> JsonDict:
    """The JSON Schema object a model must answer with for a block's `outputs`."""
    return {
        "type": "object",
        "properties": {name: type_schema(spec) for name, spec in outputs.items()},
        "required": [name for name, spec in outputs.items() if not spec.has_default],
        "additionalProperties": False,
    }


def type_schema(spec: TypeSpec) -> JsonDict:
    """JSON Schema of one declared value."""
    schema: JsonDict = {} if spec.type == "any" else {"type": spec.type}
    if spec.description:
        schema["description"] = spec.description
    if spec.enum is not None:
        schema["enum"] = list(spec.enum)
    if spec.type == "array" and spec.items is not None:
        schema["items"] = type_schema(spec.items)
    if spec.type == "object" and spec.properties:
        schema["properties"] = {key: type_schema(sub) for key, sub in spec.properties.items()}
        schema["required"] = [key for key, sub in spec.properties.items() if not sub.has_default]
    return schema


# `type_schema`'s keywords, the subset `schema_verdict` decides; `description` has no say in a verdict
_SHAPE_KEYS = frozenset(
    {"type", "description", "enum", "items", "properties", "required", "additionalProperties"}
)
_JSON_SCALARS = (str, int, float, bool, type(None))


def schema_verdict(value: Any, schema: Mapping[str, Any]) -> bool | None:
    """Whether `value` is valid against `schema` as jsonschema's Draft 2020-12 validator decides, for the
    schemas `outputs_schema` and `type_schema` write (typed properties, `required`, `additionalProperties:
    false`, `items`, `enum`), without importing jsonschema (tens of milliseconds at a cold start);
    None for a schema or a value outside that subset: the caller asks jsonschema
    (tests/test_typecheck_schema_verdict.py holds the two to the same verdicts)."""
    try:
        return _valid(value, schema)
    except _Outside:
        return None


class _Outside(Exception):
    """A schema keyword or a value type `schema_verdict` leaves to jsonschema."""


def _valid(value: Any, schema: Any) -> bool:
    if not isinstance(schema, dict) or not _SHAPE_KEYS.issuperset(schema):
        raise _Outside
    if not isinstance(value, (*_JSON_SCALARS, list, dict)):
        raise _Outside  # a tuple, a Decimal...: jsonschema's own type rules decide
    verdict = True
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        verdict = False
    enum = schema.get("enum")
    if enum is not None:
        if not isinstance(enum, list):
            raise _Outside
        verdict = verdict and any(_equal(choice, value) for choice in enum)
    items = schema.get("items")
    if items is not None and isinstance(value, list):
        # every item: an _Outside anywhere counts
        verdict = all([_valid(item, items) for item in value]) and verdict
    if isinstance(value, dict):
        verdict = _valid_object(value, schema) and verdict
    else:
        _shape(schema)
    return verdict


def _shape(schema: JsonDict) -> tuple[JsonDict, list[JsonValue], JsonValue]:
    properties, required = schema.get("properties", {}), schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        not isinstance(properties, dict)
        or not isinstance(required, list)
        or not isinstance(extra, bool)
        or not all(isinstance(key, str) for key in required)
        or ("items" in schema and schema["items"] is None)
    ):
        raise _Outside
    return properties, required, extra


def _valid_object(value: JsonDict, schema: JsonDict) -> bool:
    properties, required, extra = _shape(schema)
    verdict = all([_valid(value[key], sub) for key, sub in properties.items() if key in value])
    if any(key not in value for key in required):
        verdict = False
    if extra is False and any(key not in properties for key in value):
        verdict = False
    return verdict


def _is_type(value: Any, kind: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":  # Draft 4 and later: 3.0 is an integer
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return not isinstance(value, bool) and isinstance(value, (int, float))
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    raise _Outside  # a list of types, an unknown name


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's equality for `enum`: true and 1 differ, containers compared item by item."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            key in two and _equal(item, two[key]) for key, item in one.items()
        )
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    return bool(one == two)


def describe(value: Any) -> str:
    """'string 'abc'', 'integer 3', 'array of 2 items', ... for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int):
        return f"integer {_json(value)}"
    if isinstance(value, float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {_show(value)}"
    if isinstance(value, list | tuple):
        return f"array of {len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _conform_type(value: Any, spec: TypeSpec, name: str, text_from_numbers: bool) -> Any:
    kind = spec.type
    if kind == "any":
        return value
    if kind == "string":
        if isinstance(value, str):
            return value
        if text_from_numbers and isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
    elif kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
    elif kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    elif kind == "array":
        if isinstance(value, list | tuple):
            return _conform_array(value, spec, name, text_from_numbers)
    elif kind == "object" and isinstance(value, dict):
        return _conform_object(value, spec, name, text_from_numbers)
    raise TypeMismatch(f"'{name}' must be {_expected(spec)}, got {describe(value)}")


def _conform_array(
    value: list[Any] | tuple[Any, ...], spec: TypeSpec, name: str, text_from_numbers: bool
) -> list[Any]:
    """A list or tuple as a list, each item conformed to `items` when the spec says what they are."""
    if spec.items is None:
        return list(value)
    return [
        conform(item, spec.items, f"{name}[{i}]", text_from_numbers=text_from_numbers)
        for i, item in enumerate(value)
    ]


def _conform_object(
    value: JsonDict, spec: TypeSpec, name: str, text_from_numbers: bool
) -> JsonDict:
    if not spec.properties:
        return value
    result = dict(value)
    for key, sub in spec.properties.items():
        if key in value:
            result[key] = conform(
                value[key], sub, f"{name}.{key}", text_from_numbers=text_from_numbers
            )
        elif sub.has_default:
            result[key] = copy.deepcopy(sub.default)
        else:
            raise TypeMismatch(f"'{name}' is missing key '{key}' ({sub.type})")
    return result


def _expected(spec: TypeSpec) -> str:
    if spec.type == "array" and spec.items is not None and spec.items.type != "any":
        return f"an array of {spec.items.type}s"
    return _ARTICLE.get(spec.type, spec.type)


def _show(value: Any, limit: int = 40) -> str:
    text = repr(value) if isinstance(value, str) else _json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int) and int_problem(value) is not None:
        return f"<{value.bit_length()}-bit integer>"  # str() of more than 4300 digits raises
    return str(value)
