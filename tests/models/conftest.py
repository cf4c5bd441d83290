"""Fixtures for model tests: a running OpenAI stub and models pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engine.models import ModelResolver
from engine.spec import ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import PLANTED_KEY
from tests.support.openai_stub import OpenAIStub


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


@pytest.fixture
def openai_model(stub: OpenAIStub) -> Callable[..., Any]:
    """openai_model(**profile_fields) -> the StructuredModel of block `greet` on the stub."""

    def make(env: dict[str, str] | None = None, **fields: Any) -> Any:
        profile = ModelProfile(
            **{
                "provider": "openai",
                "name": "stub-model",
                "base_url": stub.base_url,
                "api_key_env": "STUB_KEY",
                **fields,
            }
        )
        resolver = ModelResolver(
            ConfigSpec(models={"default": profile}),
            env={"STUB_KEY": PLANTED_KEY} if env is None else env,
        )
        return resolver.for_block(LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi")))

    return make
