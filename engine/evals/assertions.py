"""Checking a case's assertions, all but judges (engine/evals/judge.py): each gives a `Check` with an
exact message when it fails (docs/evals.md lists them).

An assertion looks at one output (`output:`), else at the flow's only output, else at all outputs as
one JSON object. Text assertions (contains, regex) read a text output as it is and any other value as
its JSON text; regexes are RE2, as routers' are (linear time whatever the model answers). `expr` is a
bare template expression in the engine's sandbox, as a router's `expr` (engine/templates/render.py), over
`outputs`, `inputs`, `expected` and `usage`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import re2
from jsonschema import Draft202012Validator

from engine.core.usage import Spend, money
from engine.core.values import JsonDict
from engine.spec.common import parse_duration
from engine.spec.evals import Assertion
from engine.templates.render import TemplateError, evaluate

MISSING = object()
SHOWN = 80  # characters of a value quoted in a message


def label(assertion: Assertion) -> str:
    """How reports name an assertion: its `name`, else its kind and value (and output)."""
    if assertion.name:
        return assertion.name
    kind = assertion.kind
    value: Any = getattr(assertion, kind, None)
    if kind == "judge" and assertion.judge is not None:
        text = f"judge {_quote(assertion.judge.rubric, 60)}"
    elif kind == "json_schema":
        text = "json_schema"
    elif kind in ("max_cost_usd", "max_tokens", "max_latency"):
        text = f"{kind} {value}"
    elif kind == "contains" and isinstance(value, list):
        text = "contains " + ", ".join(_quote(item, 30) for item in value)
    else:
        text = f"{kind} {_quote(value, 40) if isinstance(value, str) else _json(value, 40)}"
    return f"{text} ({assertion.output})" if assertion.output else text


def check(
    assertion: Assertion,
    outputs: Mapping[str, Any],
    declared: tuple[str, ...],
    scope: Mapping[str, Any],
    spend: Spend,
    latency_ms: float,
) -> tuple[bool, str]:
    """(passed, why not) of every assertion but a judge; `declared` are the flow's outputs."""
    kind = assertion.kind
    if kind == "max_cost_usd":
        return _max_cost(float(assertion.max_cost_usd or 0), spend)
    if kind == "max_tokens":
        limit = int(assertion.max_tokens or 0)
        tokens = spend.tokens
        return tokens <= limit, f"{tokens:,} tokens, above max_tokens {limit:,}"
    if kind == "max_latency":
        limit_ms = parse_duration(str(assertion.max_latency)) * 1000
        return (
            latency_ms <= limit_ms,
            f"latency {_seconds(latency_ms)}, above max_latency {assertion.max_latency}",
        )
    if kind == "expr":
        return _expr(str(assertion.expr), scope)
    what, value = subject(assertion.output, outputs, declared)
    if value is MISSING:
        return (
            False,
            f"output '{assertion.output}' missing (outputs: {', '.join(outputs) or 'none'})",
        )
    if kind == "equals":
        return _equal(
            value, assertion.equals
        ), f"{what} is {_json(value)}, expected {_json(assertion.equals)}"
    if kind == "contains":
        wanted = (
            assertion.contains
            if isinstance(assertion.contains, list)
            else [str(assertion.contains)]
        )
        text = as_text(value)
        absent = [item for item in wanted if item not in text]
        return (
            not absent,
            f"{what} does not contain {', '.join(_quote(item) for item in absent)}: {_quote(text)}",
        )
    if kind == "regex":
        text = as_text(value)
        return _regex(str(assertion.regex)).search(
            text
        ) is not None, f"{what} does not match /{assertion.regex}/: {_quote(text)}"
    if kind == "json_schema":
        problem = _schema_problem(value, assertion.json_schema or {})
        return problem is None, f"{what} does not match the JSON Schema: {problem}"
    return False, f"unknown assertion kind '{kind}'"  # refused by `blockyard validate` (BY880)


def subject(
    output: str | None, outputs: Mapping[str, Any], declared: tuple[str, ...]
) -> tuple[str, Any]:
    """(how messages name it, the value) an assertion looks at."""
    if output is not None:
        return f"output '{output}'", outputs.get(output, MISSING)
    if len(declared) == 1:
        return f"output '{declared[0]}'", outputs.get(declared[0], MISSING)
    return "the outputs", dict(outputs)


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _max_cost(limit: float, spend: Spend) -> tuple[bool, str]:
    if spend.unpriced_calls:
        return False, (
            f"cost unknown ({spend.unpriced_calls} of {spend.model_calls} model calls have no price; "
            f"state `pricing:` in the profile), max_cost_usd {money(limit)}"
        )
    return (
        spend.cost_usd <= limit,
        f"cost {money(spend.cost_usd)} is above max_cost_usd {money(limit)}",
    )


def _expr(expression: str, scope: Mapping[str, Any]) -> tuple[bool, str]:
    try:
        result = evaluate(expression, scope)
    except TemplateError as exc:
        return False, f"expr '{expression}' cannot be evaluated: {exc}"
    return bool(result), f"expr '{expression}' is {_json(result)}"


def _equal(found: Any, wanted: Any) -> bool:
    """JSON equality: 1 equals 1.0, but true is not 1 (as in JSON, not as in Python)."""
    if isinstance(found, bool) or isinstance(wanted, bool):
        return isinstance(found, bool) and isinstance(wanted, bool) and found == wanted
    if isinstance(found, dict) and isinstance(wanted, dict):
        return found.keys() == wanted.keys() and all(
            _equal(found[key], wanted[key]) for key in found
        )
    if isinstance(found, list) and isinstance(wanted, list):
        return len(found) == len(wanted) and all(
            _equal(a, b) for a, b in zip(found, wanted, strict=True)
        )
    return bool(found == wanted)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = (
        False  # RE2 would print its own copy of an error on stderr (validate reports it: BY313)
    )
    return re2.compile(pattern, options=options)


def _schema_problem(value: Any, schema: JsonDict) -> str | None:
    validator = Draft202012Validator(schema)
    error = next(
        iter(sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))), None
    )
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{error.message}{f' (at {where})' if where else ''}"


def _seconds(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _json(value: Any, limit: int = SHOWN) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(text: str, limit: int = SHOWN) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return "'" + shown.replace("\n", "\\n") + "'"
