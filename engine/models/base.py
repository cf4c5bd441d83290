"""What the compiler asks of a model, and what a provider must implement.

Two layers: `StructuredModel` is the contract the compiler codes against (ask for an object
matching a schema, get it validated). Providers implement the smaller `Generator`: produce one
candidate reply for a conversation; engine/models/structured.py turns any generator into a
StructuredModel with validation and one repair retry, so every provider behaves the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from engine.core.values import JsonDict


@dataclass(frozen=True)
class StructuredRequest:
    """One structured-output call of a block, with everything needed for messages and errors."""

    flow: str
    step: str
    block: str
    system: str | None
    user: str | None
    output_schema: JsonDict
    inputs: JsonDict
    # receives the reply's text as it arrives (`token` events); None: no streaming (engine/models/streaming.py)
    on_token: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    # in a conversation thread's turn, the conversation before it as (role, text) pairs, oldest
    # first (role: user | assistant): sent between the system prompt and the user prompt
    history: tuple[tuple[str, str], ...] = ()
    # what the call is for: a block's step, or `compose` (a TaskPlan drafted from an intent and the
    # yard's catalog, docs/compose.md: the offline mock drafts one itself, engine/models/mock_plans.py), or
    # `thread_name` (the name a conversation thread gets from its first message: engine/runtime/naming.py),
    # or `judge` (an eval's LLM judge scoring a case: engine/evals/judge.py; the mock scores by a rule,
    # engine/models/mock_judge.py)
    purpose: Literal["block", "compose", "thread_name", "judge"] = "block"


class StructuredModel(Protocol):
    async def structured(self, request: StructuredRequest) -> JsonDict:
        """Ask for JSON matching request.output_schema; returns the validated object."""
        ...


@dataclass(frozen=True)
class Turn:
    """An extra chat turn appended after the request's own messages (the repair conversation)."""

    role: Literal["assistant", "user"]
    text: str


@dataclass(frozen=True)
class Candidate:
    """One reply of a provider: a parsed JSON value, or raw text that structured.py will parse."""

    value: Any = None
    text: str | None = None
    parsed: bool = field(default=False)
    # the token counts the provider reported for the reply (engine/models/calls.py `Tokens`); None: none
    usage: Any = field(default=None, compare=False)

    @classmethod
    def of_value(cls, value: Any) -> Candidate:
        return cls(value=value, parsed=True)

    @classmethod
    def of_text(cls, text: str) -> Candidate:
        return cls(text=text)


class Generator(Protocol):
    """A provider: turns a request (plus repair turns) into one candidate reply."""

    provider: str
    model: str

    async def generate(self, request: StructuredRequest, turns: tuple[Turn, ...]) -> Candidate: ...
