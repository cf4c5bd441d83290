"""Templates and expressions: parse them with Jinja2's AST and check every name they read.

Where a template sits decides what it may read (its scope): a prompt or a compute expression
sees the block's inputs; a step-level template sees `inputs`, `context`, `steps` and the `as`
items of the bodies it is in. The scope answers one question: is this variable path fine here?
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jinja2 import nodes

from engine.core.diagnostics import did_you_mean
from engine.definitions.load import JsonPath
from engine.templates.render import ENV, TemplateError, constant_problem, is_template, parse

MEMORY_NAMES = ("user_preferences", "user_history")
ALWAYS = frozenset(ENV.globals) | {"loop"}  # Jinja's globals, and `loop` inside {% for %}


@dataclass(frozen=True)
class Problem:
    code: str
    message: str


Resolver = Callable[[tuple[str, ...], bool], Problem | None]
"""(variable path, guarded) -> a problem or None; guarded: read under `| default` or `is defined`."""
GUARDS = (("default", "d"), ("defined", "undefined"))
_DOTTED = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*")
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# words the Jinja parser reads as constants or operators, never as variables
_JINJA_WORDS = frozenset(
    {"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else"}
)


def scan(
    source: str, resolve: Resolver, *, expression: bool, includes: bool = False
) -> list[Problem]:
    """Syntax errors, unknown filters and tests, and unresolved variables of one template.
    `includes`: the template is a prompt, whose `{% include %}`s the caller checks."""
    found = analyze(source, expression)
    if found.error is not None:
        return [Problem("BY400", found.error)]
    problems: list[Problem] = []
    for tag, line in found.loads:
        if includes and tag == "include":
            continue
        at = f" (line {line} of the template)" if "\n" in source.strip() else ""
        if tag == "include":
            problems.append(
                Problem(
                    "BY410",
                    f"{{% include %}}{at} works only in a block's prompt (and the prompt "
                    "files it includes); write the text in place",
                )
            )
            continue
        problems.append(
            Problem(
                "BY410",
                f"{{% {tag} %}}{at} is not supported: a template cannot load other "
                "templates; write the text in place, or use {% include %} in a prompt",
            )
        )
    for message in found.over_limit:
        problems.append(Problem("BY411", message))
    for what, name in found.unknown:
        table = ENV.filters if what == "filter" else ENV.tests
        problems.append(Problem("BY407", f"unknown {what} '{name}'{did_you_mean(name, table)}"))
    for path in found.paths:
        if path[0] in ALWAYS:
            continue
        problem = resolve(path, any(path[: len(g)] == g for g in found.guarded))
        if problem is not None and problem not in problems:
            problems.append(problem)
    return problems


@dataclass(frozen=True)
class Analysis:
    """What one template reads: variable paths (longest chains), guarded paths, unknown filters/tests."""

    error: str | None = None
    paths: tuple[tuple[str, ...], ...] = ()
    guarded: tuple[tuple[str, ...], ...] = ()
    unknown: tuple[tuple[str, str], ...] = ()
    loads: tuple[
        tuple[str, int], ...
    ] = ()  # ({% include/extends/import/from %} tag, line in the template)
    over_limit: tuple[str, ...] = ()  # constant expressions that always exceed a limit


@lru_cache(maxsize=8192)
def analyze(source: str, expression: bool) -> Analysis:
    """Parse once and walk the tree once (validating a large yard parses thousands of templates)."""
    simple = _simple_paths(source, expression)
    if simple is not None:
        return Analysis(None, _longest(simple))
    try:
        tree = parse(source, expression=expression)
    except TemplateError as exc:
        return Analysis(error=str(exc))
    except RecursionError:
        return Analysis(error=f"{'expression' if expression else 'template'} is nested too deeply")
    walker = _Walker()
    try:
        walker.visit(tree)
    except RecursionError:
        return Analysis(error=f"{'expression' if expression else 'template'} is nested too deeply")
    paths = _longest([p for p in walker.paths if p[0] not in walker.local])
    return Analysis(
        None,
        paths,
        tuple(walker.guarded),
        tuple(dict.fromkeys(walker.unknown)),
        tuple(walker.loads),
        tuple(dict.fromkeys(walker.over_limit)),
    )


def _longest(paths: list[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    """Distinct paths, sorted, without those another path extends (`steps.a.outputs.x` covers `steps.a`)."""
    kept: list[tuple[str, ...]] = []
    for path in sorted(set(paths), key=len, reverse=True):
        if not any(other[: len(path)] == path for other in kept):
            kept.append(path)
    return tuple(sorted(kept))


def _simple_paths(source: str, expression: bool) -> list[tuple[str, ...]] | None:
    """The paths of a template made only of `{{ a.b.c }}` placeholders (most of them), without Jinja;
    None when the template needs the real parser."""
    if expression:
        match = _DOTTED.fullmatch(source)
        return (
            [_split(match.group(1))] if match is not None and _plain_root(match.group(1)) else None
        )
    if "{%" in source or "{#" in source:
        return None
    paths: list[tuple[str, ...]] = []
    for inner in _PLACEHOLDER.findall(source):
        match = _DOTTED.fullmatch(inner)
        if match is None or not _plain_root(match.group(1)):
            return None
        paths.append(_split(match.group(1)))
    if "{{" in _PLACEHOLDER.sub("", source):
        return None
    return paths


def _split(dotted: str) -> tuple[str, ...]:
    return tuple(dotted.split("."))


def _plain_root(dotted: str) -> bool:
    return dotted.split(".", 1)[0] not in _JINJA_WORDS


class _Walker:
    """One pass over a Jinja2 AST."""

    def __init__(self) -> None:
        self.paths: list[tuple[str, ...]] = []
        self.local: set[str] = set()
        self.guarded: list[tuple[str, ...]] = []
        self.unknown: list[tuple[str, str]] = []
        self.loads: list[tuple[str, int]] = []
        self.over_limit: list[str] = []
        self.in_operator = False

    def visit(self, node: nodes.Node) -> None:
        if isinstance(node, nodes.Getattr | nodes.Getitem):
            self.chain(node)
            return
        if isinstance(node, nodes.Name):
            if node.ctx == "load":
                self.paths.append((node.name,))
            else:  # store (for, set) and param (macro arguments) names are the template's own
                self.local.add(node.name)
            return
        if isinstance(node, nodes.Filter | nodes.Test):
            self.filter_or_test(node)
        elif isinstance(node, nodes.Include | nodes.Extends | nodes.Import | nodes.FromImport):
            self.loads.append((_LOAD_TAGS[type(node)], node.lineno))
            # the names it would bind are the template's own (BY410 says it all)
            if isinstance(node, nodes.Import):
                self.local.add(node.target)
            elif isinstance(node, nodes.FromImport):
                self.local.update(name if isinstance(name, str) else name[1] for name in node.names)
        elif isinstance(node, nodes.BinExpr) and not self.in_operator:
            # once, at the outermost operator: a chain is not re-evaluated
            problem = constant_problem(node)
            if problem is not None:
                self.over_limit.append(problem)
                return
            self.in_operator = True
            for child in node.iter_child_nodes():
                self.visit(child)
            self.in_operator = False
            return
        elif isinstance(node, nodes.Macro):
            self.local.add(node.name)
        for child in node.iter_child_nodes():
            self.visit(child)

    def chain(self, node: nodes.Node) -> None:
        parts: list[str] = []
        while isinstance(node, nodes.Getattr | nodes.Getitem):
            if isinstance(node, nodes.Getattr):
                parts.append(node.attr)
            elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
                parts.append(node.arg.value)
            else:  # x[expr]: the expression is read on its own, the chain restarts below it
                self.visit(node.arg)
                parts.clear()
            node = node.node
        if isinstance(node, nodes.Name) and node.ctx == "load":
            self.paths.append((node.name, *reversed(parts)))
        else:
            self.visit(node)

    def filter_or_test(self, node: nodes.Filter | nodes.Test) -> None:
        is_filter = isinstance(node, nodes.Filter)
        table = ENV.filters if is_filter else ENV.tests
        if node.name not in table:
            self.unknown.append(("filter" if is_filter else "test", node.name))
        if node.name in GUARDS[0 if is_filter else 1] and node.node is not None:
            path = _plain_path(node.node)
            if path:
                self.guarded.append(path)


_LOAD_TAGS: dict[type[nodes.Node], str] = {
    nodes.Include: "include",
    nodes.Extends: "extends",
    nodes.Import: "import",
    nodes.FromImport: "from ... import",
}


def _plain_path(node: nodes.Node) -> tuple[str, ...]:
    """`context.a.b` -> ('context', 'a', 'b'); () for anything that is not a plain chain."""
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
            return Problem(
                "BY401",
                f"{where} sees the block's inputs by name ({listed}), not '{root}': bind "
                f"the value to an input in the step's `with:` and use the input's name",
            )
        return Problem(
            "BY401",
            f"unknown variable '{root}': {where} sees the block's inputs "
            f"({listed}){did_you_mean(root, known)}",
        )

    return resolve
