"""Shared helpers of the model tests (a module of its own: conftest modules are not importable by name)."""

from __future__ import annotations

from typing import Any

from engine.models import StructuredRequest

PLANTED_KEY = "sk-planted-SECRET-0123456789abcdef"
GREETING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "greeting": {"type": "string"},
        "mood": {"type": "string", "enum": ["happy", "calm"]},
    },
    "required": ["greeting", "mood"],
    "additionalProperties": False,
}


def make_request(
    schema: dict[str, Any] | None = None,
    *,
    step: str = "greet",
    block: str = "greet",
    inputs: dict[str, Any] | None = None,
    user: str | None = "Greet Ada.",
) -> StructuredRequest:
    return StructuredRequest(
        flow="hello",
        step=step,
        block=block,
        system="You greet people.",
        user=user,
        output_schema=GREETING_SCHEMA if schema is None else schema,
        inputs={"name": "Ada"} if inputs is None else inputs,
    )
