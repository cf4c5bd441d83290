"""Model providers: structured output from openai, azure, anthropic (extra) or the offline mock.

The compiler asks `ModelResolver(config, run_id=...).for_block(block)` for a StructuredModel and
awaits `structured(StructuredRequest(...))`; failures are ModelError (classified for retries by
`is_transient`), outputs that never match the schema are ModelOutputError.

The names below load with their module on first use: `blockyard validate` imports
`engine.models.replies` (the rules of a mock's replies), which must not bring in the resolver,
the providers and asyncio with them (a fifth of a cold `validate`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # each name from its home in _HOMES: import-linter sees the edges, mypy types the names
    # (tests/test_registries.py keeps the two in step)
    from engine.models.agentic import AgentModel, TurnRequest
    from engine.models.base import StructuredModel, StructuredRequest
    from engine.models.errors import ModelError, ModelOutputError, is_transient
    from engine.models.resolver import MOCK_NOTE, ModelResolver
    from engine.models.script import MockScript, register_script, scripted, unregister_script

_HOMES = {
    "AgentModel": "agentic",
    "TurnRequest": "agentic",
    "StructuredModel": "base",
    "StructuredRequest": "base",
    "ModelError": "errors",
    "ModelOutputError": "errors",
    "is_transient": "errors",
    "MOCK_NOTE": "resolver",
    "ModelResolver": "resolver",
    "MockScript": "script",
    "register_script": "script",
    "scripted": "script",
    "unregister_script": "script",
}

__all__ = [
    "MOCK_NOTE",
    "AgentModel",
    "MockScript",
    "ModelError",
    "ModelOutputError",
    "ModelResolver",
    "StructuredModel",
    "StructuredRequest",
    "TurnRequest",
    "is_transient",
    "register_script",
    "scripted",
    "unregister_script",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value
