"""Templates and expressions: parse them with Jinja2's AST and check every name they read.

Where a template sits decides what it may read (its scope): a prompt or a compute expression
sees the block's inputs; a step-level template sees `inputs`, `context`, `steps` and the `as`
items of the bodies it is in. The scope answers one question: is this variable path fine here?
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

from engine.diagnostics import did_you_mean
from engine.load import JsonPath
from engine.templates import ENV, TemplateError, is_template, parse, references

MEMORY_NAMES = ("user_preferences", "user_history")
ALWAYS = frozenset(ENV.globals) | {"loop"}  # Jinja's globals, and `loop` inside {% for %}


@dataclass(frozen=True)
class Problem:
    code: str
    message: str


Resolver = Callable[[tuple[str, ...], bool], Problem | None]
"""(variable path, guarded) -> a problem or None; guarded: read under `| default` or `is defined`."""
GUARDS = (("default", "d"), ("defined", "undefined"))


def scan(source: str, resolve: Resolver, *, expression: bool) -> list[Problem]:
    """Syntax errors, unknown filters and tests, and unresolved variables of one template."""
    try:
        tree = parse(source, expression=expression)
    except TemplateError as exc:
        return [Problem("BY400", str(exc))]
    problems: list[Problem] = []
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        table = ENV.filters if isinstance(node, nodes.Filter) else ENV.tests
        if node.name not in table:
            what = "filter" if isinstance(node, nodes.Filter) else "test"
            problems.append(Problem("BY407", f"unknown {what} '{node.name}'{did_you_mean(node.name, table)}"))
    guarded = _guarded(tree)
    for path in references(source, expression=expression):
        if path[0] in ALWAYS:
            continue
        problem = resolve(path, any(path[: len(g)] == g for g in guarded))
        if problem is not None and problem not in problems:
            problems.append(problem)
    return problems


def _guarded(tree: nodes.Template) -> list[tuple[str, ...]]:
    """Variable paths read through `| default(...)` or tested with `is defined`: absence is handled."""
    found: list[tuple[str, ...]] = []
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        names = GUARDS[0] if isinstance(node, nodes.Filter) else GUARDS[1]
        if node.name in names and node.node is not None:
            path = _plain_path(node.node)
            if path:
                found.append(path)
    return found


def _plain_path(node: nodes.Node) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, nodes.Getattr | nodes.Getitem):
        if isinstance(node, nodes.Getattr):
            parts.append(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            parts.append(node.arg.value)
        else:
            return ()
        node = node.node
    return (node.name, *reversed(parts)) if isinstance(node, nodes.Name) else ()


def bindings(value: Any, path: JsonPath) -> Iterator[tuple[str, JsonPath]]:
    """Every template string inside a `with:` value (lists and mappings are walked)."""
    if isinstance(value, str):
        if is_template(value):
            yield value, path
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from bindings(item, (*path, position))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from bindings(item, (*path, key))


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def names_scope(names: list[str], where: str, *, extra: tuple[str, ...] = ()) -> Resolver:
    """A scope of plain names: a block's inputs (prompts, compute, memory keys)."""
    known = [*names, *extra]

    def resolve(path: tuple[str, ...], guarded: bool) -> Problem | None:
        root = path[0]
        if root in known or guarded:
            return None
        listed = ", ".join(names) if names else "none declared"
        if root in ("inputs", "context", "steps"):
            return Problem("BY401", f"{where} sees the block's inputs by name ({listed}), not '{root}': bind "
                                    f"the value to an input in the step's `with:` and use the input's name")
        return Problem("BY401", f"unknown variable '{root}': {where} sees the block's inputs "
                                f"({listed}){did_you_mean(root, known)}")

    return resolve
