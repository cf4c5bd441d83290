"""The offline mock model: deterministic, schema-valid outputs derived from the inputs.

Scripted replies (a run's registered MockScript first, then the profile's `replies`) take
precedence; a scripted reply goes through the same validation and repair as a real model's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engine.models.base import Candidate, StructuredRequest, Turn
from engine.models.errors import TRANSIENT_KINDS, ModelError
from engine.models.mock_values import fake, seed_of, summarize
from engine.models.script import MockScript
from engine.spec import ModelProfile, parse_duration


class MockGenerator:
    """Generator of the `mock` provider."""

    provider = "mock"

    def __init__(self, profile: ModelProfile, *, run_script: MockScript | None = None) -> None:
        self.model = profile.name or "mock"
        self.delay = parse_duration(profile.delay) if profile.delay else 0.0
        self.run_script = run_script
        self.profile_script = MockScript(profile.replies) if profile.replies else None

    def __repr__(self) -> str:
        return f"MockGenerator(model={self.model!r}, delay={self.delay!r})"

    async def generate(self, request: StructuredRequest, turns: tuple[Turn, ...]) -> Candidate:
        if self.run_script is not None and not turns:
            self.run_script.record(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        for script in (self.run_script, self.profile_script):
            if script is None:
                continue
            found, reply = script.next_reply(request)
            if found:
                return self._scripted(reply, request)
        label = f"{request.block}: {summarize(request.inputs)}"
        return Candidate.of_value(fake(request.output_schema, seed=seed_of(request.block, request.inputs),
                                       label=label))

    def _scripted(self, reply: Any, request: StructuredRequest) -> Candidate:
        if isinstance(reply, dict) and "$error" in reply:
            kind = str(reply["$error"])
            message = str(reply.get("message") or f"scripted {kind} error")
            raise ModelError(f"mock model '{self.model}', step '{request.step}': {message}", provider="mock",
                             model=self.model, kind=kind if kind in TRANSIENT_KINDS else None)
        if isinstance(reply, dict):
            return Candidate.of_value(reply)
        if isinstance(reply, str):
            try:
                parsed = json.loads(reply)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return Candidate.of_value(parsed)
        properties = request.output_schema.get("properties") or {}
        if len(properties) == 1:
            # a decide block's single enum output can be scripted as just the choice
            return Candidate.of_value({next(iter(properties)): reply})
        return Candidate.of_text(reply) if isinstance(reply, str) else Candidate.of_value(reply)
