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
from collections.abc import Mapping
from typing import Any

from engine.diagnostics import did_you_mean
from engine.errors import UsageError
from engine.spec import TypeSpec
from engine.values import int_problem, text_problem, value_problem

_ARTICLE = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "a boolean",
            "array": "an array", "object": "an object"}


class TypeMismatch(ValueError):
    """A value that does not fit its declared type; the message names where (e.g. 'lines[2].qty')."""


class InputError(UsageError):
    """Flow inputs that do not match the flow's declared inputs (unknown, missing or mistyped)."""


def conform(value: Any, spec: TypeSpec, name: str = "value", *, text_from_numbers: bool = False) -> Any:
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


def coerce_inputs(declared: Mapping[str, TypeSpec], given: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """A flow's inputs from what the caller gave: defaults applied, every value checked.

    Unknown keys (with a did-you-mean), missing required inputs, mistyped values and values
    outside the value domain (engine/values.py: integers beyond 64 bits, lone surrogates) are all
    reported at once in one InputError whose message starts with `where` (e.g. "flow 'hello'").
    """
    problems: list[str] = []
    result: dict[str, Any] = {}
    for key in given:
        if not isinstance(key, str) or text_problem(key) is not None:
            problems.append(f"input name {key!r} is not valid text")
        elif key not in declared:
            known = f"; its inputs are {', '.join(sorted(declared))}" if declared else "; it takes no inputs"
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


def outputs_schema(outputs: Mapping[str, TypeSpec]) -> dict[str, Any]:
    """The JSON Schema object a model must answer with for a block's `outputs`."""
    return {
        "type": "object",
        "properties": {name: type_schema(spec) for name, spec in outputs.items()},
        "required": [name for name, spec in outputs.items() if not spec.has_default],
        "additionalProperties": False,
    }


def type_schema(spec: TypeSpec) -> dict[str, Any]:
    """JSON Schema of one declared value."""
    schema: dict[str, Any] = {} if spec.type == "any" else {"type": spec.type}
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
            if spec.items is None:
                return list(value)
            return [conform(item, spec.items, f"{name}[{i}]", text_from_numbers=text_from_numbers)
                    for i, item in enumerate(value)]
    elif kind == "object" and isinstance(value, dict):
        return _conform_object(value, spec, name, text_from_numbers)
    raise TypeMismatch(f"'{name}' must be {_expected(spec)}, got {describe(value)}")


def _conform_object(value: dict[str, Any], spec: TypeSpec, name: str, text_from_numbers: bool) -> dict[str, Any]:
    if not spec.properties:
        return value
    result = dict(value)
    for key, sub in spec.properties.items():
        if key in value:
            result[key] = conform(value[key], sub, f"{name}.{key}", text_from_numbers=text_from_numbers)
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
