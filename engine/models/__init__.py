"""Model providers: structured output from openai, azure, anthropic (extra) or the offline mock.

The compiler asks `ModelResolver(config, run_id=...).for_block(block)` for a StructuredModel and
awaits `structured(StructuredRequest(...))`; failures are ModelError (classified for retries by
`is_transient`), outputs that never match the schema are ModelOutputError.
"""

from __future__ import annotations

from engine.models.agentic import AgentModel, TurnRequest
from engine.models.base import StructuredModel, StructuredRequest
from engine.models.errors import ModelError, ModelOutputError, is_transient
from engine.models.resolver import MOCK_NOTE, ModelResolver
from engine.models.script import MockScript, register_script, scripted, unregister_script

__all__ = [
    "MOCK_NOTE", "AgentModel", "MockScript", "ModelError", "ModelOutputError", "ModelResolver", "StructuredModel",
    "StructuredRequest", "TurnRequest", "is_transient", "register_script", "scripted", "unregister_script",
]
