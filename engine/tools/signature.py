"""A tool's argument schema and description, derived from a Python function.

Type hints map to JSON Schema (str, int, float, bool, list[X], dict[str, X], X | None, unions,
Literal[...], Annotated[X, "description"]); parameters with defaults are optional; the
docstring's first paragraph is the description and its `Args:` section describes parameters.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections import abc as cabc
from collections.abc import Callable
from typing import Any

from engine.core.values import JsonDict
from engine.tools.errors import ToolError

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?)\s*:\s*$")
_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SIMPLE: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


class UnsupportedHint(Exception):
    """A type hint with no JSON Schema equivalent."""


def describe(func: Callable[..., Any], tool: str) -> tuple[JsonDict, str]:
    """(parameters schema, description) of func, or a ToolError naming the tool and parameter."""
    try:
        signature = inspect.signature(func)
        hints = _parameter_hints(func, signature)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolError(
            f"tool '{tool}': cannot read the type hints of {_name(func)} ({exc}); declare "
            "`parameters` for the tool in blockyard.yaml"
        ) from None
    summary, arg_docs = parse_docstring(inspect.getdoc(func) or "")
    properties: JsonDict = {}
    required: list[str] = []
    extra = False
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise ToolError(
                f"tool '{tool}': parameter '{param.name}' of {_name(func)} cannot be passed by "
                "keyword; tools are called with keyword arguments"
            )
        try:
            schema = hint_schema(hints.get(param.name, Any))
        except UnsupportedHint as exc:
            raise ToolError(
                f"tool '{tool}': parameter '{param.name}' has type {exc}, which has no JSON Schema "
                "equivalent; declare `parameters` for the tool in blockyard.yaml"
            ) from None
        if param.name in arg_docs and "description" not in schema:
            schema["description"] = arg_docs[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif _jsonable(param.default):
            schema["default"] = param.default
        properties[param.name] = schema
    parameters: JsonDict = {
        "type": "object",
        "properties": properties,
        "additionalProperties": extra,
    }
    if required:
        parameters["required"] = required
    return parameters, summary


def summary(func: Callable[..., Any]) -> str:
    """The first paragraph of func's docstring."""
    return parse_docstring(inspect.getdoc(func) or "")[0]


def hint_schema(hint: Any) -> JsonDict:
    """JSON Schema of one type hint; raises UnsupportedHint."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = hint_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if origin is typing.Literal:
        schema = {"enum": list(args)}
        kinds = {_SIMPLE.get(type(a)) for a in args}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [hint_schema(a) for a in args]
        simple = [o.get("type") for o in options]
        if all(len(o) == 1 and isinstance(t, str) for o, t in zip(options, simple, strict=True)):
            return {"type": simple}
        return {"anyOf": options}
    if hint in (list, set, frozenset) or origin in (list, set, frozenset, cabc.Sequence):
        item = args[0] if args else Any
        return (
            {"type": "array", "items": hint_schema(item)} if item is not Any else {"type": "array"}
        )
    if hint is dict or origin in (dict, cabc.Mapping):
        if len(args) == 2 and args[0] is not str:
            raise UnsupportedHint(_hint_name(hint))
        value = args[1] if len(args) == 2 else Any
        return (
            {"type": "object", "additionalProperties": hint_schema(value)}
            if value is not Any
            else {"type": "object"}
        )
    raise UnsupportedHint(_hint_name(hint))


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(first paragraph, {parameter: description}) of a Google-style docstring."""
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line):
            break
        summary.append(line.strip())
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        this_indent = len(line) - len(line.lstrip())
        match = _ARG.match(line)
        if match and (current is None or this_indent <= indent):
            current, indent = match.group(1), this_indent
            args[current] = match.group(3).strip()
        elif current is not None:
            args[current] = (args[current] + " " + line.strip()).strip()
    return " ".join(summary), args


def _parameter_hints(func: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """Evaluated hints of the parameters only: a return type imported under TYPE_CHECKING is fine."""
    annotations = {
        p.name: p.annotation
        for p in signature.parameters.values()
        if p.annotation is not inspect.Parameter.empty
    }
    target = inspect.unwrap(func)
    shim = types.SimpleNamespace(
        __annotations__=annotations, __globals__=getattr(target, "__globals__", {})
    )
    return typing.get_type_hints(shim, include_extras=True)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _name(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', repr(func))}"


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
