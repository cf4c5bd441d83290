"""The Jinja2 environment templates run in: the immutable sandbox, strict about undefined names, and
bounded (engine/templates/limits.py, with the measurements of engine/templates/checks.py).

Where a bound is enforced:
- binary operators (`*`, `**`, `%`, `+`, ...) are intercepted and sized before they are computed;
- every call (methods, macros, `range`, `lipsum`) and every filter goes through a hook that
  counts it, refuses arguments that would make the result too big, and checks what it returns;
- `{% for %}` loops iterate through a counter (the code generator wraps each loop's items), and
  a recursive `loop(...)` is counted the same way: nested and recursive loops run out of budget;
- `~`, the text a template renders (also inside `{% set %}` blocks, macros and filter blocks) and
  each `{{ value }}` are measured before they are joined into one string;
- `str.format` measures each field as it is formatted.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from functools import update_wrapper
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

from engine.templates.checks import (
    METHOD_CHECKS,
    MeasuringEscapeFormatter,
    MeasuringFormatter,
    binop,
    bounded_lipsum,
    bounded_range,
    bounded_sum,
    budget_or_fold,
    guard_filter,
)
from engine.templates.limits import current

# ---- the code generator ---------------------------------------------------------------------------

_LOOP_ITEMS = "loop_items"


def _is_loop_items(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.EnvironmentAttribute)
        and node.node.name == _LOOP_ITEMS
    )


class BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with each loop's items counted and `~` measured.

    Jinja allows no custom node types, so a loop's items become a call of the environment's
    `loop_items`, written out here as a direct call (not through the sandbox's call hook)."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        for loop in node.find_all(nodes.For):
            if not _is_loop_items(loop.iter):
                loop.iter = nodes.Call(
                    nodes.EnvironmentAttribute(_LOOP_ITEMS),
                    [loop.iter],
                    [],
                    None,
                    None,
                    lineno=loop.iter.lineno,
                )
        super().visit_Template(node, frame)

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        if _is_loop_items(node):
            self.write(f"environment.{_LOOP_ITEMS}(")
            self.visit(node.args[0], frame)
            self.write(")")
            return
        super().visit_Call(node, frame, forward_caller=forward_caller)

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.joined((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


# ---- the environment ------------------------------------------------------------------------------


def _bounded_concat(parts: Iterable[str]) -> str:
    """Join rendered text (a template, a `{% set %}` block, a macro's body), within the string limit."""
    budget = current()
    limit = budget.limits.max_string
    if type(parts) is list:  # a block's buffer: its parts exist already
        budget.string(sum(map(len, parts)), "rendered text")
        return "".join(parts)
    total = 0
    kept: list[str] = []
    for part in parts:  # a template's output, as it is produced
        total += len(part)
        if total > limit:
            budget.string(total, "rendered text")
        kept.append(part)
    return "".join(kept)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _finalize(value: Any) -> Any:
    """Each `{{ value }}` of a template: a list or object is measured before it is turned into text."""
    if type(value) not in _SCALARS and isinstance(
        value, (list, tuple, dict, set, frozenset, Mapping)
    ):
        budget_or_fold().text(value, "rendered value")
    return value


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with the bounds above. Data keys win over mapping methods: `inputs.items` is the
    input named `items`, not dict.items."""

    code_generator_class = BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "%", "+", "-", "/", "//"})
    concat = staticmethod(_bounded_concat)

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=_finalize, **options)
        self.globals["range"] = bounded_range
        self.globals["lipsum"] = bounded_lipsum
        self.filters["sum"] = bounded_sum

    def guard_filters(self) -> None:
        """Route every filter through `guard_filter` (call after adding the environment's own filters)."""
        self.filters = {name: guard_filter(name, fn) for name, fn in self.filters.items()}

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        return binop(current(), operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        kind = type(__obj)
        if kind is types.BuiltinMethodType or kind is types.MethodType:
            # str's methods, or Markup's
            check = METHOD_CHECKS.get(__obj.__name__)
            if check is not None and isinstance(__obj.__self__, (str, bytes, int)):
                replaced = check(budget, __obj.__self__, args, kwargs)
                if replaced is not None:
                    args = replaced
        elif kind is LoopContext and args:  # a recursive loop going one level down
            args = (budget.iterate(args[0]), *args[1:])
        return budget.check(super().call(__context, __obj, *args, **kwargs), "result")

    def loop_items(self, items: Any) -> Any:
        return current().iterate(items)

    def joined(self, parts: tuple[Any, ...]) -> str:
        """`a ~ b ~ c`, measured before it is joined."""
        budget = current()
        budget.string(sum(budget.text(part, "joined value") for part in parts), "joined string")
        return "".join(map(str, parts))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """str.format and str.format_map, formatted by a measuring formatter."""
        if (
            not isinstance(value, (types.MethodType, types.BuiltinMethodType))
            or value.__name__ not in ("format", "format_map")
            or not isinstance(value.__self__, str)
        ):
            return None
        subject: str = value.__self__
        is_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            budget = current()
            formatter: MeasuringFormatter
            if isinstance(subject, Markup):
                formatter = MeasuringEscapeFormatter(self, budget, escape=subject.escape)
            else:
                formatter = MeasuringFormatter(self, budget)
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one positional argument")
                kwargs, args = args[0], ()
            return type(subject)(formatter.vformat(subject, args, kwargs))

        return update_wrapper(wrapper, value)
