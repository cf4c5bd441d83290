"""The engine's value domain: what a flow input, a step output or a decision value may hold.

Values are JSON data whose integers fit in signed 64 bits and whose text is valid Unicode
(docs/flows.md, "Values"). Run state is checkpointed with msgpack, which cannot hold a larger
integer, and text with a lone UTF-16 surrogate (what Python makes of undecodable bytes) cannot
be written as UTF-8 to the database, a log or an HTTP response. Such values are refused where
they enter: the command line, the Python API, validated YAML, and each step's outputs.

No LangGraph here: the validator and the CLI import this module.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias

# A JSON value (null, bool, int, float, str, list, object) as the engine passes it around: inputs,
# outputs, event data, decision values. `Any` on purpose: a recursive union would have every reader
# narrow it before use; what a value may hold is checked at run time (below, engine/spec/typecheck.py).
JsonValue: TypeAlias = Any
# A JSON object: a step's outputs, a run's inputs, an event's data.
JsonDict: TypeAlias = dict[str, JsonValue]

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
INT_RANGE = "-2^63 .. 2^63-1"
_SURROGATE = re.compile("[\ud800-\udfff]")


class ValueDomainError(ValueError):
    """A value outside the engine's value domain; the message names where it is."""


def int_problem(value: int) -> str | None:
    """Why integer `value` cannot be a value, or None. Never formats the number: one with more than
    4300 digits cannot even be printed."""
    if INT_MIN <= value <= INT_MAX:
        return None
    return f"is an integer outside the 64-bit range ({INT_RANGE}; this one has {value.bit_length()} bits)"


def text_problem(value: str) -> str | None:
    """Why text `value` cannot be a value (a lone surrogate), or None."""
    if value.isascii():  # O(1) in CPython: the common case costs nothing
        return None
    found = _SURROGATE.search(value)
    if found is None:
        return None
    return (
        f"holds a lone surrogate character U+{ord(found.group()):04X} at position {found.start()} "
        "(not valid Unicode text: undecodable bytes?)"
    )


def value_problem(value: Any, name: str = "value") -> str | None:
    """None when `value` is in the value domain, else what is wrong, naming where: e.g.
    "'lines[2].qty' is an integer outside the 64-bit range (...)"."""
    if isinstance(value, str):
        problem = text_problem(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        problem = int_problem(value)
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            found = value_problem(item, f"{name}[{position}]")
            if found is not None:
                return found
        return None
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and text_problem(key) is not None:
                return f"'{_printable(name)}' has a key that {text_problem(key)}"
            found = value_problem(item, f"{name}.{key}")
            if found is not None:
                return found
        return None
    else:
        return None
    return None if problem is None else f"'{_printable(name)}' {problem}"


def check_value(value: Any, name: str = "value") -> Any:
    """`value` itself, or ValueDomainError naming `name` when it is outside the domain."""
    problem = value_problem(value, name)
    if problem is not None:
        raise ValueDomainError(problem)
    return value


def _printable(name: str) -> str:
    # a key with a lone surrogate in a path would make the message itself unprintable
    return (
        name
        if text_problem(name) is None
        else name.encode("utf-8", "backslashreplace").decode("utf-8")
    )
