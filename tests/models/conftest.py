"""Fixtures for model tests: a running OpenAI stub, requests, and resolvers pointed at the stub."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.openai_stub import OpenAIStub

from engine.models import ModelResolver, StructuredRequest
from engine.spec import BlockSpec, ConfigSpec, ModelProfile

PLANTED_KEY = "sk-planted-SECRET-0123456789abcdef"
GREETING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"greeting": {"type": "string"}, "mood": {"type": "string", "enum": ["happy", "calm"]}},
    "required": ["greeting", "mood"],
    "additionalProperties": False,
}


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def make_request(schema: dict[str, Any] | None = None, *, step: str = "greet", block: str = "greet",
                 inputs: dict[str, Any] | None = None, user: str | None = "Greet Ada.") -> StructuredRequest:
    return StructuredRequest(flow="hello", step=step, block=block, system="You greet people.", user=user,
                             output_schema=GREETING_SCHEMA if schema is None else schema,
                             inputs={"name": "Ada"} if inputs is None else inputs)


@pytest.fixture
def openai_model(stub: OpenAIStub) -> Callable[..., Any]:
    """openai_model(**profile_fields) -> the StructuredModel of block `greet` on the stub."""

    def make(env: dict[str, str] | None = None, **fields: Any) -> Any:
        profile = ModelProfile(**{"provider": "openai", "name": "stub-model", "base_url": stub.base_url,
                                  "api_key_env": "STUB_KEY", **fields})
        resolver = ModelResolver(ConfigSpec(models={"default": profile}),
                                 env={"STUB_KEY": PLANTED_KEY} if env is None else env)
        return resolver.for_block(BlockSpec(block="greet", kind="llm"))

    return make
