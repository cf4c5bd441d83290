"""What each operation of a template may make, measured before it is made (engine/templates/limits.py).

- binary operators: `'a' * n`, `[x] * n`, `2 ** n`, `a * b`, `s + t`, and printf-style `%`
  (widths, precisions and `*` arguments, and the values it formats) are sized from their operands;
- methods of strings (`center`, `ljust`, `rjust`, `zfill`, `expandtabs`, `replace`, `join`,
  `translate`, `encode`, and `int.to_bytes`) from their arguments; `str.format` field by field;
- filters: those that pad, repeat or join (`center`, `indent`, `wordwrap`, `replace`, `join`,
  `format`, `batch`, `slice`) from their arguments; `sum` (`bounded_sum`) from the items it would
  add, its input taken in first, so that a generator or `attribute=` hides nothing; those that turn a value into text
  (`string`, `tojson`, `pprint`, ...) from the value's size as text; those that go through their
  input item by item cost a step per item. Every filter's result is checked too.
Jinja folds constant expressions while it compiles a template; with no budget then, the checks
raise `Impossible`, so that the work is left to run time, under the limits of the run.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping
from functools import update_wrapper
from typing import Any

from jinja2 import Environment, nodes, pass_environment
from jinja2.filters import make_attrgetter
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
)
from jinja2.utils import generate_lorem_ipsum

from engine.templates.limits import Budget, NoBudget, current

Check = Callable[[Budget, Any, tuple[Any, ...], dict[str, Any]], "tuple[Any, ...] | None"]


def budget_or_fold() -> Budget:
    """The render's budget; at compile time (constant folding) Impossible: the work is left to run time."""
    try:
        return current()
    except NoBudget:
        raise nodes.Impossible() from None  # compile time: not folded, computed at run time


# ---- binary operators ---------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int)


def _sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _text(value: Any) -> bool:
    return isinstance(value, (str, bytes))


def _check_mul(budget: Budget, left: Any, right: Any) -> None:
    for seq, count in ((left, right), (right, left)):
        if _is_int(count) and (_text(seq) or _sequence(seq)):
            size = len(seq) * max(count, 0)
            if _text(seq):
                budget.string(size, "repeated string")
            else:
                budget.items(size, "repeated list")
            return
    if _is_int(left) and _is_int(right):
        budget.bits(left.bit_length() + right.bit_length() - 1, "product")


def _check_pow(budget: Budget, left: Any, right: Any) -> None:
    if _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
        # beyond any limit, without a float overflow
        exponent = right if right.bit_length() <= 64 else 2**64
        budget.bits(exponent * math.log2(abs(left)), "power")


def _check_add(budget: Budget, left: Any, right: Any) -> None:
    if _text(left) and _text(right):
        budget.string(len(left) + len(right), "joined string")
    elif _sequence(left) and _sequence(right):
        budget.items(len(left) + len(right), "joined list")


def _check_mod(budget: Budget, left: Any, right: Any) -> None:
    if isinstance(left, str):
        printf_size(budget, left, right)


_BINOP_CHECKS: dict[str, Callable[[Budget, Any, Any], None]] = {
    "*": _check_mul,
    "**": _check_pow,
    "+": _check_add,
    "%": _check_mod,
}
BINOPS: dict[str, Callable[[Any, Any], Any]] = dict(
    ImmutableSandboxedEnvironment.default_binop_table
)


def binop(budget: Budget, operator: str, left: Any, right: Any) -> Any:
    """`left <operator> right`, refused before it is computed when the result would be over a limit."""
    budget.tick()
    if type(left) is int and type(right) is int and operator != "**":  # the common case, kept short
        if operator == "*":
            # the product has at least this many bits: refused before it is computed
            budget.bits(left.bit_length() + right.bit_length() - 1, "product")
        return budget.check(BINOPS[operator](left, right), "result")  # others grow by a bit at most
    check_binop(budget, operator, left, right)
    return budget.check(BINOPS[operator](left, right), "result")


def check_binop(budget: Budget, operator: str, left: Any, right: Any) -> None:
    """Raise LimitExceeded when `left <operator> right` would be over a limit; computes nothing."""
    if operator == "*" and type(left) is int and type(right) is int:
        budget.bits(left.bit_length() + right.bit_length() - 1, "product")
        return
    check = _BINOP_CHECKS.get(operator)
    if check is not None:
        check(budget, left, right)


# ---- printf-style and str.format -----------------------------------------------------------------

_PRINTF = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[#0 +\-]*(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?[hlL]?"
    r"(?P<conv>[diouxXeEfFgGcrsab%])"
)


def printf_size(budget: Budget, fmt: str, args: Any) -> None:
    """Refuse `fmt % args` when its result would be over the string limit (measured, not built)."""
    mapping = args if isinstance(args, Mapping) else None
    positional = list(args) if isinstance(args, tuple) else [args]
    total = len(fmt)
    for spec in _PRINTF.finditer(fmt):
        if spec["conv"] == "%":
            continue
        width = _printf_number(budget, spec["width"], positional)
        precision = _printf_number(budget, spec["prec"], positional)
        if mapping is not None and spec["key"] is not None:
            value = mapping.get(spec["key"])
        else:
            value = positional.pop(0) if positional else None
        size = budget.text(value, "formatted value")
        if spec["conv"] in "ra":
            size *= 10  # escapes: at most ten characters for one
        total += max(width, size + precision)
        budget.string(total, "formatted string")


def _printf_number(budget: Budget, text: str | None, positional: list[Any]) -> int:
    if not text:
        return 0
    if text == "*":
        value = positional.pop(0) if positional else 0
        number = abs(value) if isinstance(value, int) else 0
    else:
        number = int(text) if len(text) < 20 else budget.limits.max_string + 1
    budget.string(number, "format width")
    return number


_NUMBER = re.compile(r"\d+")


class MeasuringFormatter(SandboxedFormatter):
    """str.format: every field measured before it is formatted, and their running total bounded."""

    def __init__(self, env: Any, budget: Budget, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self._budget = budget
        self._total = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        widest = max(
            (
                int(n) if len(n) < 20 else self._budget.limits.max_string + 1
                for n in _NUMBER.findall(format_spec)
            ),
            default=0,
        )
        self._budget.string(widest, "format width")
        self._total += max(widest, self._budget.text(value, "formatted value"))
        self._budget.string(self._total, "formatted string")
        return super().format_field(value, format_spec)


class MeasuringEscapeFormatter(MeasuringFormatter, SandboxedEscapeFormatter):
    pass


# ---- methods and filters that make big results from small inputs ---------------------------------


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _int_arg(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _check_width(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    width = _int_arg(_arg(args, kwargs, 0, "width", 0))
    budget.string(width, "padded string")


def _check_expandtabs(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if _text(value):
        tab = "\t" if isinstance(value, str) else b"\t"
        size = _int_arg(_arg(args, kwargs, 0, "tabsize", 8))
        budget.string(len(value) + value.count(tab) * max(size, 0), "expanded string")


def _check_replace(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    old, new = _arg(args, kwargs, 0, "old", None), _arg(args, kwargs, 1, "new", None)
    count = _arg(args, kwargs, 2, "count", -1)
    if not (_text(value) and _text(old) and _text(new)) or type(old) is not type(value):
        return
    times = value.count(old) if old else len(value) + 1
    if isinstance(count, int) and count >= 0:
        times = min(times, count)
    budget.string(len(value) + times * max(len(new) - len(old), 0), "replaced string")


def _materialized(budget: Budget, items: Any, what: str = "joined items") -> list[Any]:
    kept = list(itertools.islice(iter(items), budget.limits.max_items + 1))
    budget.items(len(kept), what)
    return kept


def _check_str_join(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    items = _materialized(budget, _arg(args, kwargs, 0, "iterable", ()))
    total = sum(len(item) if _text(item) else 0 for item in items) + max(len(items) - 1, 0) * len(
        value
    )
    budget.string(total, "joined string")
    return (items,)


def _check_join_filter(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...] | None:
    items = _materialized(budget, value)
    sep = _arg(args, kwargs, 0, "d", "")
    total = sum(budget.text(item, "joined item") for item in items) + max(len(items) - 1, 0) * len(
        str(sep)
    )
    budget.string(total, "joined string")
    return (items, *args)


def _check_translate(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    table = _arg(args, kwargs, 0, "table", None)
    # str.translate looks each character up in any table that can be indexed: a dict, or a list or tuple
    # indexed by code point (a string's entries are one character each: nothing grows)
    if isinstance(value, str) and isinstance(table, (Mapping, list, tuple)):
        entries = table.values() if isinstance(table, Mapping) else table
        longest = max((len(item) for item in entries if isinstance(item, str)), default=1)
        budget.string(len(value) * max(longest, 1), "translated string")


def _check_to_bytes(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    budget.string(_int_arg(_arg(args, kwargs, 0, "length", 1)), "bytes")


def _check_encode(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if isinstance(value, str):
        budget.string(len(value) * 4, "encoded string")


def _check_indent(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    width = _arg(args, kwargs, 0, "width", 4)
    step = len(width) if isinstance(width, str) else _int_arg(width)
    budget.string(step, "indent")
    text = value if isinstance(value, str) else ""
    budget.string(len(text) + (text.count("\n") + 1) * max(step, 0), "indented string")


def _check_wordwrap(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    width = max(_int_arg(_arg(args, kwargs, 0, "width", 79)), 1)
    wrap = _arg(args, kwargs, 2, "wrapstring", None)
    text = value if isinstance(value, str) else ""
    lines = len(text) // width + text.count("\n") + 1
    budget.string(
        len(text) + lines * len(wrap if isinstance(wrap, str) else "\n"), "wrapped string"
    )


def _check_center_filter(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    budget.string(_int_arg(_arg(args, kwargs, 0, "width", 80)), "centered string")


def _check_format_filter(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if isinstance(value, str):
        printf_size(budget, value, kwargs or args)


def _check_count(name: str, index: int, key: str) -> Check:
    def check(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        budget.items(_int_arg(_arg(args, kwargs, index, key, 0)), f"{name}()")

    return check


def _check_as_text(factor: int) -> Check:
    """Filters that turn their input into text: the input, as text, must be within the limit."""

    def check(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        budget.string(budget.text(value, "filtered value") * factor, "filtered text")

    return check


@pass_environment
def bounded_sum(
    environment: Environment, iterable: Any, attribute: str | int | None = None, start: Any = 0
) -> Any:
    """Jinja's `sum` filter, sized first: sum() of lists or strings concatenates them, one copy of the
    total so far per item. The input is taken in (at most template_max_items of it) and `attribute`
    looked up before anything is added, so a generator (`select`, `map`) or an attribute cannot hide
    the size of what is summed."""
    budget = budget_or_fold()
    items = _materialized(budget, iterable, "summed items")
    if attribute is not None:
        getter = make_attrgetter(environment, attribute)
        items = [getter(item) for item in items]
        budget.tick(len(items))
    if isinstance(start, (list, tuple, str)):
        sizes = [len(item) for item in items if isinstance(item, (list, tuple, str))]
        budget.items(len(start) + sum(sizes), "sum()")
        # each step copies the total so far
        budget.tick(len(sizes) * (len(start) + sum(sizes)) // 2)
    return sum(items, start)


def _check_list_filter(
    budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if hasattr(value, "__len__"):
        budget.items(len(value), "list")


METHOD_CHECKS: dict[str, Check] = {
    "center": _check_width,
    "ljust": _check_width,
    "rjust": _check_width,
    "zfill": _check_width,
    "expandtabs": _check_expandtabs,
    "replace": _check_replace,
    "join": _check_str_join,
    "translate": _check_translate,
    "to_bytes": _check_to_bytes,
    "encode": _check_encode,
}

_FILTER_CHECKS: dict[str, Check] = {
    "center": _check_center_filter,
    "indent": _check_indent,
    "wordwrap": _check_wordwrap,
    "replace": _check_replace,
    "join": _check_join_filter,
    "format": _check_format_filter,
    "batch": _check_count("batch", 0, "linecount"),
    "slice": _check_count("slice", 0, "slices"),
    "list": _check_list_filter,
    **{name: _check_as_text(1) for name in ("string", "pprint", "tojson", "xmlattr")},
    **{name: _check_as_text(6) for name in ("escape", "e", "forceescape", "urlize")},
    "urlencode": _check_as_text(12),
}


# Filters that go through their input item by item (in Python, or building something per item):
# they cost as many steps as the input has items, so that the clock is looked at as often in a
# loop of such filters as in a loop of loops.
_ITERATING = frozenset(
    {
        "select",
        "reject",
        "selectattr",
        "rejectattr",
        "map",
        "sort",
        "unique",
        "groupby",
        "sum",
        "join",
        "list",
        "min",
        "max",
        "dictsort",
        "batch",
        "slice",
        "tojson",
        "string",
        "pprint",
        "items",
        "xmlattr",
        "urlencode",
    }
)


def guard_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` counted, its arguments checked (`_FILTER_CHECKS`) and its result sized."""
    pass_arg = getattr(fn, "jinja_pass_arg", None)
    skip = 1 if pass_arg is not None else 0
    check = _FILTER_CHECKS.get(name)
    iterating = name in _ITERATING

    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget = budget_or_fold()
        value: Any = args[skip] if len(args) > skip else None
        budget.tick(len(value) + 1 if iterating and hasattr(value, "__len__") else 1)
        if check is not None and len(args) > skip:
            replaced = check(budget, value, args[skip + 1 :], kwargs)
            if replaced is not None:
                args = (*args[:skip], *replaced)
        return budget.check(fn(*args, **kwargs))

    update_wrapper(guarded, fn)
    if pass_arg is not None:
        guarded.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return guarded


def bounded_range(*args: int) -> range:
    """range(), at most template_max_items long."""
    numbers = range(*args)
    budget_or_fold().items(len(numbers), "range()")
    return numbers


def bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    """lipsum(), its size bounded like any other string."""
    budget = budget_or_fold()
    words = _int_arg(max) if _int_arg(max) > _int_arg(min) else _int_arg(min)
    budget.string(_int_arg(n) * words * 16, "lipsum()")
    return generate_lorem_ipsum(n, html, min, max)
