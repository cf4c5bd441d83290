"""JSON Schema validation of loaded documents, every error at its line and column."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from engine.diagnostics import Diagnostic, did_you_mean
from engine.load import Document


def schema_dir() -> Path:
    """Schemas ship inside the wheel (engine/schemas); a source checkout keeps them at the top."""
    packaged = Path(__file__).resolve().parent.parent / "schemas"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "schemas"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """name: block, flow or config."""
    return json.loads((schema_dir() / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(name))


def check(doc: Document, name: str) -> list[Diagnostic]:
    """All schema errors of `doc` against schema `name`, one diagnostic per problem."""
    if not isinstance(doc.data, dict):
        found = type(doc.data).__name__ if doc.data is not None else "nothing"
        kind = {"list": "a list", "str": "a plain value", "int": "a number", "float": "a number",
                "bool": "a boolean"}.get(found, found)
        return [doc.diag((), "BY101", f"expected a mapping with a '{name}:' key at the top, found {kind}")]
    found: list[Diagnostic] = []
    for error in _validator(name).iter_errors(doc.data):
        found.extend(_explain(doc, error, name))
    return sorted(set(found))


def _explain(doc: Document, error: ValidationError, schema: str) -> list[Diagnostic]:
    path = tuple(error.absolute_path)
    where = _where(path)
    if error.validator == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        extras = [key for key in error.instance if key not in allowed]
        return [doc.diag((*path, key), "BY102",
                         f"unknown key '{key}'{where}{did_you_mean(key, allowed)}", key=True)
                for key in extras]
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in error.instance]
        return [doc.diag(path, "BY103", f"missing required key '{key}'{where}", key=True) for key in missing]
    if error.validator == "type":
        return [doc.diag(path, "BY104", f"{_name(path)} must be {_types(error.validator_value)}, "
                                        f"not {_describe(error.instance)}")]
    if error.validator == "enum":
        options = ", ".join(str(v) for v in error.validator_value)
        hint = did_you_mean(str(error.instance), [str(v) for v in error.validator_value])
        return [doc.diag(path, "BY105", f"{_name(path)} is '{error.instance}'; expected one of: {options}{hint}")]
    if error.validator == "const":
        return [doc.diag(path, "BY105", f"{_name(path)} must be '{error.validator_value}'")]
    if error.validator == "pattern":
        return [doc.diag(path, "BY106", f"{_name(path)} '{error.instance}' is not valid: {_pattern_help(error)}")]
    if error.validator == "propertyNames":
        bad = error.instance
        return [doc.diag(path, "BY106", f"name '{bad}'{where} is not valid: {_pattern_help(error)}")]
    if error.validator in ("anyOf", "oneOf"):
        return _best_of(doc, error, schema)
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems",
                           "maxItems", "minLength", "maxLength"):
        return [doc.diag(path, "BY107", f"{_name(path)}: {error.message}")]
    return [doc.diag(path, "BY100", f"{_name(path)}: {error.message}")]


def _best_of(doc: Document, error: ValidationError, schema: str) -> list[Diagnostic]:
    """Of the alternatives, explain the one that got furthest (a mapping alternative for a mapping)."""
    path = tuple(error.absolute_path)
    instance = error.instance
    options = error.validator_value
    wanted = [_types(o.get("type")) if "type" in o else "a mapping" for o in options if isinstance(o, dict)]
    candidates = [e for e in error.context if _fits(e, instance)]
    if candidates:
        deepest = max(len(e.absolute_path) for e in candidates)
        found: list[Diagnostic] = []
        for sub in candidates:
            if len(sub.absolute_path) == deepest:
                found.extend(_explain(doc, sub, schema))
        return found
    return [doc.diag(path, "BY104", f"{_name(path)} must be {' or '.join(dict.fromkeys(wanted))}, "
                                    f"not {_describe(instance)}")]


def _fits(error: ValidationError, instance: Any) -> bool:
    """True when the alternative has the instance's JSON type, so its errors are the useful ones."""
    if error.validator == "type" and not error.relative_path:
        return False
    return not (isinstance(instance, str) and error.validator == "type")


def _pattern_help(error: ValidationError) -> str:
    pattern = error.validator_value if error.validator == "pattern" else ""
    if "ms|s|m|h" in str(pattern) or "ms|s|m" in str(pattern):
        return "use a duration such as 500ms, 30s, 5m or 2h"
    if "A-Za-z_" in str(pattern) and ":" in str(pattern):
        return "use module:function"
    if "A-Z_" in str(pattern):
        return "use an environment variable name such as OPENAI_API_KEY"
    return "names start with a letter or '_' and contain only letters, digits, '_' and '-'"


def _where(path: tuple[Any, ...]) -> str:
    return f" in {_name(path)}" if path else ""


def _name(path: tuple[Any, ...]) -> str:
    if not path:
        return "the document"
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return f"'{text}'"


_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
               "array": "a list", "object": "a mapping", "null": "empty"}


def _types(value: Any) -> str:
    if isinstance(value, list):
        return " or ".join(_TYPE_WORDS.get(v, v) for v in value)
    return _TYPE_WORDS.get(value, str(value))


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string '{value}'" if len(value) < 40 else "a string"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "nothing" if value is None else type(value).__name__
