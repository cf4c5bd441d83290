"""Jinja2 templates and bare expressions, sandboxed and strict.

Shared by the validator (which parses them and lists the names they read) and the runtime
(which renders them). Imports nothing heavier than jinja2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

_SINGLE = re.compile(r"^\s*\{\{(?P<expr>.*?)\}\}\s*$", re.DOTALL)


class TemplateError(Exception):
    """A template or expression that does not parse or does not render."""


class _Environment(ImmutableSandboxedEnvironment):
    """Data keys win over mapping methods: `inputs.items` is the input named `items`, not dict.items."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)


def _env() -> ImmutableSandboxedEnvironment:
    env = _Environment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["tojson"] = _tojson
    return env


def _tojson(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


ENV = _env()


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def single_expression(text: str) -> str | None:
    """The expression of a string that is exactly one `{{ expr }}`, else None."""
    match = _SINGLE.match(text)
    if match is None or "{{" in match.group("expr") or "}}" in match.group("expr"):
        return None
    return match.group("expr").strip()


@lru_cache(maxsize=4096)
def _compiled_template(source: str) -> Any:
    try:
        return ENV.from_string(source)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message}") from None


@lru_cache(maxsize=4096)
def _compiled_expression(source: str) -> Any:
    try:
        return ENV.compile_expression(source, undefined_to_none=False)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"expression syntax error in '{source}': {exc.message}") from None


def evaluate(expression: str, scope: Mapping[str, Any]) -> Any:
    """Evaluate a bare expression (compute, items, until, router expr)."""
    fn = _compiled_expression(expression)
    try:
        result = fn(**scope)
        if isinstance(result, Undefined):
            result._fail_with_undefined_error()
        return result
    except Exception as exc:  # the sandbox raises many kinds; the user needs the message
        raise TemplateError(f"cannot evaluate '{expression}': {_why(exc)}") from None


def render(value: Any, scope: Mapping[str, Any]) -> Any:
    """Render a binding: exactly one `{{ expr }}` keeps its type, mixed text renders to text.

    Lists and dicts are rendered element-wise; other values pass through unchanged.
    """
    if isinstance(value, str):
        if not is_template(value):
            return value
        expr = single_expression(value)
        if expr is not None:
            return evaluate(expr, scope)
        template = _compiled_template(value)
        try:
            return template.render(**scope)
        except Exception as exc:
            raise TemplateError(f"cannot render '{_short(value)}': {_why(exc)}") from None
    if isinstance(value, list):
        return [render(item, scope) for item in value]
    if isinstance(value, dict):
        return {key: render(item, scope) for key, item in value.items()}
    return value


def render_text(source: str, scope: Mapping[str, Any]) -> str:
    """Render a template to text (prompts, messages)."""
    template = _compiled_template(source)
    try:
        return template.render(**scope)
    except Exception as exc:
        raise TemplateError(f"cannot render '{_short(source)}': {_why(exc)}") from None


def check_syntax(source: str, *, expression: bool = False) -> str | None:
    """None when `source` parses, else the error message."""
    try:
        parse(source, expression=expression)
    except TemplateError as exc:
        return str(exc)
    return None


@lru_cache(maxsize=4096)
def parse(source: str, *, expression: bool = False) -> nodes.Template:
    text = "{{ " + source + " }}" if expression else source
    try:
        return ENV.parse(text)
    except TemplateSyntaxError as exc:
        kind = "expression" if expression else "template"
        raise TemplateError(f"{kind} syntax error: {exc.message}") from None


def references(source: str, *, expression: bool = False) -> list[tuple[str, ...]]:
    """Variable paths a template reads, e.g. [('context', 'status'), ('inputs',), ('text',)].

    Only names that are not assigned inside the template (loop variables, `set`) are listed.
    Attribute and constant-subscript chains are followed so that `steps.a.outputs.x` is
    ('steps', 'a', 'outputs', 'x').
    """
    tree = parse(source, expression=expression)
    local: set[str] = set()
    for node in tree.find_all((nodes.For, nodes.Assign, nodes.AssignBlock)):
        target = getattr(node, "target", None)
        for name in target.find_all(nodes.Name) if target is not None else ():
            local.add(name.name)
        if isinstance(target, nodes.Name):
            local.add(target.name)
    found: list[tuple[str, ...]] = []
    seen: set[int] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        chain = _chain(node)
        if chain is None or chain[1] in seen:
            continue
        path, ids = chain
        seen.update(ids)
        if path[0] not in local:
            found.append(path)
    for node in tree.find_all(nodes.Name):
        if node.ctx == "load" and id(node) not in seen and node.name not in local:
            found.append((node.name,))
    # keep the longest path for each chain, drop prefixes already covered
    found.sort(key=len, reverse=True)
    result: list[tuple[str, ...]] = []
    for path in found:
        if not any(other[: len(path)] == path for other in result):
            result.append(path)
    return sorted(result)


def _chain(node: nodes.Node) -> tuple[tuple[str, ...], set[int]] | None:
    parts: list[str] = []
    ids: set[int] = set()
    current: Any = node
    while True:
        if isinstance(current, nodes.Getattr):
            parts.append(current.attr)
            current = current.node
        elif isinstance(current, nodes.Getitem) and isinstance(current.arg, nodes.Const) \
                and isinstance(current.arg.value, str):
            parts.append(current.arg.value)
            current = current.node
        elif isinstance(current, nodes.Getitem):
            parts.clear()
            current = current.node
        elif isinstance(current, nodes.Name):
            ids.add(id(current))
            return (current.name, *reversed(parts)), ids
        else:
            return None


def _why(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace("jinja2.exceptions.", "")


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
