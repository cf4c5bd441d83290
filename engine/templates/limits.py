"""Bounds on what one template or expression may compute: the size of the values it creates and
the work it does.

A `Budget` exists for each render or evaluation (in a context variable, so the sandbox's hooks
find it without threading it through Jinja). It counts loop iterations and calls against
`max_iterations`, checks a wall-clock deadline every few hundred of them, and measures values
before they are built where building them is the danger (`'a' * n`, `x ** n`, `s.center(n)`).
The limits come from `limits:` in blockyard.yaml; a run sets them with `using_limits` (the
validator and tests use the defaults). Imports nothing heavier than the standard library.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from engine.spec.common import parse_duration

INT64_MIN = -(2**63)
# msgpack, the state store's encoding, holds integers in [INT64_MIN, UINT64_MAX]
UINT64_MAX = 2**64 - 1
_CLOCK_EVERY = 256  # steps between two looks at the clock


class LimitExceeded(Exception):
    """A template went over one of its limits; the message names the limit and where to raise it."""

    def __init__(self, message: str, what: str = "", setting: str = "") -> None:
        super().__init__(message)
        self.what = what  # what was too big ("repeated string", "power")
        self.setting = setting  # the limit's key under `limits:`


@dataclass(frozen=True, slots=True)
class TemplateLimits:
    max_string: int = 1_000_000
    max_items: int = 100_000
    max_int_bits: int = 64
    max_iterations: int = 1_000_000
    timeout: float = 5.0

    @classmethod
    def of(cls, config: Any) -> TemplateLimits:
        """The limits of a ConfigSpec (its `limits:` section)."""
        spec = config.limits
        return cls(
            spec.template_max_string,
            spec.template_max_items,
            spec.template_max_int_bits,
            spec.template_max_iterations,
            min(parse_duration(spec.template_timeout), 3600.0),
        )


DEFAULT = TemplateLimits()
# the largest settings allowed
CEILING = TemplateLimits(100_000_000, 10_000_000, 100_000, 100_000_000, 3600.0)
_LIMITS: contextvars.ContextVar[TemplateLimits] = contextvars.ContextVar(
    "blockyard_template_limits", default=DEFAULT
)
_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "blockyard_template_budget", default=None
)


@contextmanager
def using_limits(limits: TemplateLimits) -> Iterator[None]:
    """Templates rendered inside (and in tasks and threads started with a copy of this context) use `limits`."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def set_limits(limits: TemplateLimits) -> None:
    """Set the limits for the rest of the current context (a task of its own, e.g. a run's graph)."""
    _LIMITS.set(limits)


def current_limits() -> TemplateLimits:
    return _LIMITS.get()


def _setting(name: str) -> str:
    return f"limits.{name} in blockyard.yaml"


class Budget:
    """The work and size allowance of one render or evaluation."""

    __slots__ = ("_next_clock", "deadline", "limits", "steps")

    def __init__(self, limits: TemplateLimits) -> None:
        self.limits = limits
        self.steps = 0
        self.deadline = time.monotonic() + limits.timeout
        self._next_clock = min(_CLOCK_EVERY, limits.max_iterations + 1)

    def tick(self, count: int = 1) -> None:
        """Count a loop iteration or a call."""
        self.steps += count
        if self.steps >= self._next_clock:
            self._slow_tick()

    def _slow_tick(self) -> None:
        if self.steps > self.limits.max_iterations:
            raise LimitExceeded(
                f"template does more than {self.limits.max_iterations:,} loop iterations and calls "
                f"({_setting('template_max_iterations')})",
                "work",
                "template_max_iterations",
            )
        self._next_clock = min(self.steps + _CLOCK_EVERY, self.limits.max_iterations + 1)
        if time.monotonic() > self.deadline:
            raise LimitExceeded(
                f"template takes longer than {self.limits.timeout:g}s "
                f"({_setting('template_timeout')})",
                "time",
                "template_timeout",
            )

    def iterate(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """`iterable`, counting each item it yields."""
        for item in iterable:
            self.tick()
            yield item

    # ---- sizes --------------------------------------------------------------------------------

    def string(self, length: int, what: str = "template result") -> None:
        if length > self.limits.max_string:
            raise LimitExceeded(
                f"{what} exceeds the {self.limits.max_string:,}-character limit "
                f"({_setting('template_max_string')})",
                what,
                "template_max_string",
            )

    def items(self, count: int, what: str = "template result") -> None:
        if count > self.limits.max_items:
            raise LimitExceeded(
                f"{what} exceeds the {self.limits.max_items:,}-item limit "
                f"({_setting('template_max_items')})",
                what,
                "template_max_items",
            )

    def bits(self, bits: float, what: str = "integer") -> None:
        if bits > self.limits.max_int_bits:
            raise LimitExceeded(
                f"{what} exceeds the {self.limits.max_int_bits}-bit limit "
                f"({_setting('template_max_int_bits')})",
                what,
                "template_max_int_bits",
            )

    def check(self, value: Any, what: str = "template result") -> Any:
        """A value a template created: refuse it when it is over a limit (containers by their length only:
        their text is measured where they are turned into text or stored)."""
        kind = type(value)
        if kind is str or kind is bytes:
            self.string(len(value), what)
        elif kind is int:
            self.bits(value.bit_length(), what if what != "template result" else "integer result")
        elif kind in (list, tuple, dict, set, frozenset):
            self.items(len(value), what)
        return value

    def text(self, value: Any, what: str = "template result") -> int:
        """The approximate length of `value` as text (str() or JSON), refused above the limit.

        Shared parts count as often as they occur (that is how they are written out), but are
        measured once; the walk stops as soon as the limit is passed."""
        size = text_size(value, self.limits.max_string)
        if size > self.limits.max_string:
            self.string(size, what)
        return size

    def stored(self, value: Any) -> Any:
        """A template's final result, about to be stored in the run's state: its text within the limit and
        every integer in it within what the state store holds."""
        self.text(value)
        _check_ints(value)
        return value


def text_size(value: Any, limit: int) -> int:
    """Approximate characters of `value` as text; anything above `limit` may be reported as just above it."""
    return _size(value, {}, limit)


def _size(value: Any, memo: dict[int, int], limit: int) -> int:
    kind = type(value)
    if isinstance(value, (str, bytes)):
        return len(value)
    if value is None or kind is bool:
        return 5
    if kind is int:
        digits: int = value.bit_length() * 3 // 10 + 2
        return digits
    if kind is float:
        return 24
    if isinstance(value, (list, tuple, dict, set, frozenset, Mapping)):
        known = memo.get(id(value))
        if known is not None:
            return known
        memo[id(value)] = limit + 1  # a cycle counts as too big
        total = 2
        pairs = value.items() if isinstance(value, Mapping) else None
        for entry in pairs if pairs is not None else value:
            if pairs is not None:
                key, item = entry
                total += _size(key, memo, limit) + _size(item, memo, limit) + 4
            else:
                total += _size(entry, memo, limit) + 2
            if total > limit:
                break
        memo[id(value)] = total
        return total
    return 32


def _check_ints(value: Any) -> None:
    kind = type(value)
    if kind is int:
        if not INT64_MIN <= value <= UINT64_MAX:
            raise LimitExceeded(
                f"template result {_digits(value)} is outside the 64-bit integer range the run's "
                "state can hold"
            )
    elif kind in (list, tuple, set, frozenset):
        for item in value:
            _check_ints(item)
    elif kind is dict:
        for key, item in value.items():  # keys too: the state store packs them as it packs values
            _check_ints(key)
            _check_ints(item)


def _digits(value: int) -> str:
    digits = math.floor(value.bit_length() * math.log10(2)) + 1
    return f"(an integer of about {digits} digits)" if digits > 30 else f"{value}"


def current() -> Budget:
    """The budget of the render in progress. Outside one (Jinja folding constants while it compiles a
    template) there is none: the caller then leaves the work to run time, where a budget applies."""
    budget = _BUDGET.get()
    if budget is None:
        raise NoBudget()
    return budget


class NoBudget(Exception):
    """No render is in progress (constant folding at compile time)."""


def begin() -> tuple[Budget, contextvars.Token[Budget | None]]:
    """A fresh budget, under the current limits, for one render or evaluation; `end(token)` after it.
    (Not a context manager: this runs for every template of every step.)"""
    budget = Budget(_LIMITS.get())
    return budget, _BUDGET.set(budget)


def end(token: contextvars.Token[Budget | None]) -> None:
    _BUDGET.reset(token)
