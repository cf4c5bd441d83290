"""Structured output for every provider: parse, validate against the schema, repair once.

A reply that is not JSON or does not match `output_schema` gets one more chance: the model sees
its own reply and the validation error, and is asked again. A second failure raises
ModelOutputError naming flow, step, block and the error.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from engine.core.values import JsonDict, value_problem
from engine.models.base import Candidate, Generator, StructuredRequest, Turn
from engine.models.errors import ModelOutputError
from engine.spec.typecheck import schema_verdict

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)
_ECHO_LIMIT = 2000  # how much of a bad reply is shown back to the model


class StructuredClient:
    """A StructuredModel built from any provider Generator."""

    def __init__(self, generator: Generator) -> None:
        self.generator = generator

    def __repr__(self) -> str:
        return f"StructuredClient(provider={self.generator.provider!r}, model={self.generator.model!r})"

    async def structured(self, request: StructuredRequest) -> JsonDict:
        """Ask for JSON matching request.output_schema; returns the validated object."""
        first = await self.generator.generate(request, ())
        value, problem = check(first, request.output_schema)
        if problem is None:
            result: JsonDict = value  # valid against an object schema
            return result
        turns = (
            Turn("assistant", _echo(first)),
            Turn("user", repair_prompt(problem, request.output_schema)),
        )
        second = await self.generator.generate(request, turns)
        value, problem = check(second, request.output_schema)
        if problem is None:
            repaired: JsonDict = value
            return repaired
        raise ModelOutputError(
            f"flow '{request.flow}', step '{request.step}': block '{request.block}' got output from "
            f"{self.generator.provider} model '{self.generator.model}' that does not match its outputs, "
            f"even after a retry: {problem}",
            provider=self.generator.provider,
            model=self.generator.model,
        )


def check(candidate: Candidate, schema: JsonDict) -> tuple[Any, str | None]:
    """(value, None) when the candidate is JSON valid against schema, else (None, the problem).

    Chat models answer in text: for a block with exactly one output, a string, a reply that is not
    JSON is that output (JSON stays required for several outputs, or one of another type)."""
    if candidate.parsed:
        value = candidate.value
    else:
        text = (candidate.text or "").strip()
        text_output = only_string_output(schema)
        try:
            value = parse_json(text)
        except ValueError as exc:
            if text_output is None or not text:
                return None, str(exc)
            value = None
        if text_output is not None and text and not isinstance(value, dict):
            value = {
                text_output: text
            }  # plain text (`42` or `"quoted"` too) is the one text output
    # outside the value domain (engine/core/values.py) first: the schema check would print a 5000-digit
    # integer (and fail), and the step's output check would refuse the value anyway
    problem = value_problem(value, "reply") or schema_problem(value, schema)
    return (value, None) if problem is None else (None, problem)


def only_string_output(schema: JsonDict) -> str | None:
    """The name of the schema's one property when there is exactly one and it is a string, else None."""
    properties = schema.get("properties") or {}
    if len(properties) != 1:
        return None
    name, spec = next(iter(properties.items()))
    return name if isinstance(spec, dict) and spec.get("type") == "string" else None


def parse_json(text: str) -> Any:
    """The JSON value in a reply: plain, inside a ``` fence, or the outermost {...} of prose."""
    stripped = text.strip()
    attempts = [stripped]
    fenced = _FENCE.match(stripped)
    if fenced:
        attempts.append(fenced.group(1))
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        attempts.append(stripped[start : end + 1])
    for attempt in attempts:
        try:
            return json.loads(attempt)
        except ValueError:
            continue
    shown = stripped[:120] + ("..." if len(stripped) > 120 else "")
    raise ValueError(f"the reply is not JSON: {shown!r}" if stripped else "the reply is empty")


def schema_problem(value: Any, schema: JsonDict) -> str | None:
    """A one-line description of why value does not match schema, or None.

    A valid reply to the schemas blocks' outputs make is recognised without jsonschema
    (`schema_verdict`); jsonschema decides the rest and words every problem."""
    if schema_verdict(value, schema) is True:
        return None
    # only for a reply the quick check could not pass: a cold start
    from jsonschema.exceptions import best_match

    errors = list(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value))
    if not errors:
        return None
    main = best_match(errors)
    others = [e for e in errors if e is not main]
    text = _describe(main)
    if others:
        text += f" (and {len(others)} more: " + "; ".join(_describe(e) for e in others[:2])
        text += "; ..." if len(others) > 2 else ""
        text += ")"
    return text


def repair_prompt(problem: str, schema: JsonDict) -> str:
    return (
        f"Your reply does not match the required JSON schema: {problem}. "
        f"Reply again with only a JSON object that matches this schema: {json.dumps(schema)}"
    )


def _describe(error: ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    return f"at '{where}': {error.message}" if where else error.message


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator  # (see schema_problem)

    return Draft202012Validator(json.loads(schema_text))


def _echo(candidate: Candidate) -> str:
    try:
        text = candidate.text if not candidate.parsed else json.dumps(candidate.value, default=str)
    except ValueError:  # an integer of more than 4300 digits cannot be written out
        text = "(a reply that cannot be shown)"
    text = text or ""
    return text if len(text) <= _ECHO_LIMIT else text[:_ECHO_LIMIT] + "..."
