"""Jinja2 templates and bare expressions, sandboxed, strict and bounded.

Shared by the validator (which parses them and lists the names they read) and the runtime
(which renders them). Every render and evaluation gets a budget (engine/templates/limits.py):
the values it creates and the work it does are bounded by `limits:` in blockyard.yaml, as set
for the run with `using_limits` (the defaults otherwise). Imports nothing heavier than jinja2.
"""

from __future__ import annotations

import itertools
import json
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from jinja2 import (
    BaseLoader,
    Environment,
    StrictUndefined,
    TemplateNotFound,
    TemplateSyntaxError,
    Undefined,
    nodes,
)

from engine.templates.checks import binop, check_binop
from engine.templates.fast import FastExpression, FastText, compile_fast, compile_fast_text
from engine.templates.limits import CEILING, DEFAULT, Budget, LimitExceeded, begin, end
from engine.templates.sandbox import BoundedEnvironment

_SINGLE = re.compile(r"^\s*\{\{(?P<expr>.*?)\}\}\s*$", re.DOTALL)


class TemplateError(Exception):
    """A template or expression that does not parse or does not render."""


class TemplateLimitError(TemplateError):
    """A template went over one of the limits of blockyard.yaml (`limits:`)."""


# The prompt files a block's templates may include: the ones pinned with the run's definition
# (engine/definitions/prompts.py), set around each block's execution. Nothing is ever read from the disk here.
_FILES: ContextVar[Mapping[str, str] | None] = ContextVar("blockyard_prompt_files", default=None)


class _PinnedLoader(BaseLoader):
    """`{% include 'prompts/x.md' %}` from the pinned prompt files of the current run."""

    def get_source(
        self, environment: Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        files = _FILES.get()
        name = posixpath.normpath(template)
        if files is None or name not in files:
            raise TemplateNotFound(template)
        source = files[name]
        # a cached compiled include is reused only while the current run pins the same text
        return source, name, lambda: (_FILES.get() or {}).get(name) == source


@contextmanager
def prompt_files(files: Mapping[str, str]) -> Iterator[None]:
    """Let the templates rendered inside include these (pinned) prompt files."""
    token = _FILES.set(files)
    try:
        yield
    finally:
        _FILES.reset(token)


def _env() -> BoundedEnvironment:
    env = BoundedEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        loader=_PinnedLoader(),
    )
    env.filters["tojson"] = _tojson
    env.guard_filters()
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
    except (
        ValueError
    ) as exc:  # Jinja's lexer converting an integer literal beyond Python's digit limit
        raise TemplateError(f"template syntax error: {_literal_problem(exc)}") from None
    except (
        Exception
    ) as exc:  # Jinja folding a constant part that always fails (`{{ 0.a ~ 'x' }}`) while compiling
        raise _failure(exc, f"cannot render '{_short(source)}'") from None


@lru_cache(maxsize=4096)
def _compiled_text(source: str) -> FastText | None:
    return compile_fast_text(source, ENV)


def fast_text_form(source: str) -> FastText | None:
    """The compiled fast form `render_text` uses for `source`, or None when Jinja renders it."""
    return _compiled_text(source)


@lru_cache(maxsize=4096)
def _compiled_expression(source: str) -> tuple[FastExpression | None, Any, bool]:
    """The expression compiled: its fast form when it has one (engine/templates/fast.py, decided here
    once per source string), Jinja's compiled form, and whether it only reads a value
    (`steps.a.outputs.x`): such a result is data the run already holds, not something the expression made."""
    try:
        compiled = ENV.compile_expression(source, undefined_to_none=False)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"expression syntax error in '{source}': {exc.message}") from None
    except ValueError as exc:  # an integer literal beyond Python's digit limit (see parse)
        raise TemplateError(f"expression syntax error: {_literal_problem(exc)}") from None
    except (
        Exception
    ) as exc:  # Jinja folding a constant part that always fails (`0.a ~ 'x'`) while compiling
        raise _failure(exc, f"cannot evaluate '{source}'") from None
    try:
        reads_only = _is_path(parse(source, expression=True).body[0].nodes[0])  # type: ignore[attr-defined]
    except (TemplateError, AttributeError, IndexError):
        reads_only = False
    return compile_fast(source, ENV), compiled, reads_only


def fast_form(expression: str) -> FastExpression | None:
    """The compiled fast form `evaluate` uses for `expression`, or None when Jinja evaluates it."""
    return _compiled_expression(expression)[0]


def _is_path(node: nodes.Node) -> bool:
    if isinstance(node, nodes.Name):
        return True
    if isinstance(node, nodes.Getattr):
        return _is_path(node.node)
    if isinstance(node, nodes.Getitem):
        return isinstance(node.arg, nodes.Const) and _is_path(node.node)
    return False


def evaluate(expression: str, scope: Mapping[str, Any], *, fast: bool = True) -> Any:
    """Evaluate a bare expression (compute, items, until, router expr). Simple expressions take the
    fast path (engine/templates/fast.py: same results and errors); `fast=False` always renders through
    Jinja (the reference the fast path is tested and benchmarked against)."""
    quick, fn, reads_only = _compiled_expression(expression)
    budget, token = begin()
    try:
        result = quick(scope, budget) if quick is not None and fast else fn(**scope)
        if isinstance(result, Undefined):
            result._fail_with_undefined_error()
        # `items | map(...)`: its work (and its filters' budget) belongs here
        if isinstance(result, Iterator):
            result = list(itertools.islice(result, budget.limits.max_items + 1))
            budget.items(len(result))
        return result if reads_only else budget.stored(result)
    except Exception as exc:  # the sandbox raises many kinds; the user needs the message
        raise _failure(exc, f"cannot evaluate '{expression}'") from None
    finally:
        end(token)


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
        return render_text(value, scope)
    if isinstance(value, list):
        return [render(item, scope) for item in value]
    if isinstance(value, dict):
        return {key: render(item, scope) for key, item in value.items()}
    return value


def render_text(source: str, scope: Mapping[str, Any], *, fast: bool = True) -> str:
    """Render a template to text (prompts, messages). Text with simple `{{ expr }}` only takes the fast
    path (engine/templates/fast.py: same results and errors); `fast=False` always renders through Jinja."""
    template = _compiled_template(source)  # a syntax error is Jinja's to report
    quick = _compiled_text(source) if fast else None
    budget, token = begin()
    try:
        text: str = quick(scope, budget) if quick is not None else template.render(**scope)
        return text
    except Exception as exc:
        raise _failure(exc, f"cannot render '{_short(source)}'") from None
    finally:
        end(token)


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
    kind = "expression" if expression else "template"
    try:
        return ENV.parse(text)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"{kind} syntax error: {exc.message}") from None
    except (
        ValueError
    ) as exc:  # Jinja's lexer turns literals into ints: past 4300 digits Python refuses
        raise TemplateError(f"{kind} syntax error: {_literal_problem(exc)}") from None


def _literal_problem(exc: ValueError) -> str:
    if "digits" in str(exc):
        return "an integer literal has too many digits (values are 64-bit integers: docs/flows.md#values)"
    return str(exc)


def references(source: str, *, expression: bool = False) -> list[tuple[str, ...]]:
    """Variable paths a template reads, e.g. [('context', 'status'), ('inputs',), ('text',)].

    Only names that are not assigned inside the template (loop variables, `set`) are listed.
    Attribute and constant-subscript chains are followed so that `steps.a.outputs.x` is
    ('steps', 'a', 'outputs', 'x').
    """
    tree = parse(source, expression=expression)
    local: set[str] = set()
    for statement in tree.find_all((nodes.For, nodes.Assign, nodes.AssignBlock)):
        target = getattr(statement, "target", None)
        for name in target.find_all(nodes.Name) if target is not None else ():
            local.add(name.name)
        if isinstance(target, nodes.Name):
            local.add(target.name)
    found: list[tuple[str, ...]] = []
    seen: set[int] = set()
    for access in tree.find_all((nodes.Getattr, nodes.Getitem)):
        chain = _chain(access)
        if chain is None or not chain[1].isdisjoint(seen):  # an inner part of a chain already taken
            continue
        path, ids = chain
        seen.update(ids)
        if path[0] not in local:
            found.append(path)
    for name in tree.find_all(nodes.Name):
        if name.ctx == "load" and id(name) not in seen and name.name not in local:
            found.append((name.name,))
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
        elif (
            isinstance(current, nodes.Getitem)
            and isinstance(current.arg, nodes.Const)
            and isinstance(current.arg.value, str)
        ):
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


class _NotConstant(Exception):
    pass


def constant_problem(node: nodes.Expr) -> str | None:
    """Why a constant expression (`10 ** (10 ** 9)`) goes over the limits whatever blockyard.yaml
    sets, else None. Nothing over the default limits is computed: as cheap as the expression is short."""
    try:
        _constant(node, Budget(DEFAULT))
    except LimitExceeded as exc:
        return f"this expression always fails: its {exc.what} is larger than any limits.{exc.setting} allows"
    except Exception:  # not constant, or an error the run reports (1 / 0)
        return None
    return None


def _constant(node: nodes.Node, budget: Budget) -> Any:
    if isinstance(node, nodes.Const):
        return node.value
    if isinstance(node, nodes.Neg):
        return -_constant(node.node, budget)
    if isinstance(node, nodes.List | nodes.Tuple):
        items = [_constant(item, budget) for item in node.items]
        return items if isinstance(node, nodes.List) else tuple(items)
    if isinstance(node, nodes.BinExpr):
        left, right = _constant(node.left, budget), _constant(node.right, budget)
        try:  # values within the default limits are computed (to check what they take part in) ...
            return binop(budget, node.operator, left, right)
        # ... bigger ones only measured: a LimitExceeded here is over any setting
        except LimitExceeded:
            check_binop(Budget(CEILING), node.operator, left, right)
            raise _NotConstant() from None


def _failure(exc: Exception, doing: str) -> TemplateError:
    if isinstance(exc, LimitExceeded):
        return TemplateLimitError(str(exc))
    if isinstance(exc, TemplateNotFound):
        return TemplateError(
            f"{doing}: included file '{exc.name}' is not one of the prompt files pinned with the "
            "run's definition (only a block's prompt may include files)"
        )
    if isinstance(exc, RecursionError):
        return TemplateLimitError(
            f"{doing}: it recurses too deeply (a macro or recursive loop that calls itself "
            "without end?)"
        )
    return TemplateError(f"{doing}: {_why(exc)}")


def _why(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace("jinja2.exceptions.", "")


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
