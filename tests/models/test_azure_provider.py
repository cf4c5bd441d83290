"""provider: azure through AzureChatOpenAI, against the loopback stub."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from engine.models import ModelError, ModelResolver
from engine.spec import ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import PLANTED_KEY, make_request
from tests.support.openai_stub import OpenAIStub, Reply

BLOCK = LlmBlock(block="greet", kind="llm", model="azure", prompt=PromptSpec(user="hi"))


def resolver(env: dict[str, str], **fields: Any) -> ModelResolver:
    return ModelResolver(
        ConfigSpec(models={"azure": ModelProfile(provider="azure", **fields)}), env=env
    )


def test_deployment_endpoint_version_and_key(stub: OpenAIStub) -> None:
    endpoint = stub.base_url.removesuffix("/v1")
    model = resolver(
        {"AZURE_OPENAI_API_KEY": PLANTED_KEY},
        name="gpt4o-prod",
        base_url=endpoint,
        api_version="2024-10-21",
    ).for_block(BLOCK)
    stub.queue(Reply.structured_output({"greeting": "hi", "mood": "calm"}))

    assert asyncio.run(model.structured(make_request())) == {"greeting": "hi", "mood": "calm"}
    sent = stub.requests[0]
    assert sent.path == "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21"
    assert sent.headers["api-key"] == PLANTED_KEY
    assert sent.body["tool_choice"] == "required"


def test_endpoint_and_version_from_the_environment(stub: OpenAIStub) -> None:
    env = {
        "MY_AZURE_KEY": "k",
        "AZURE_OPENAI_ENDPOINT": stub.base_url.removesuffix("/v1"),
        "OPENAI_API_VERSION": "2024-06-01",
    }
    model = resolver(env, name="dep", api_key_env="MY_AZURE_KEY").for_block(BLOCK)
    stub.queue(Reply.structured_output({"greeting": "hi", "mood": "calm"}))
    asyncio.run(model.structured(make_request()))
    assert stub.requests[0].path.endswith("?api-version=2024-06-01")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"base_url": "https://x.openai.azure.com", "api_version": "v"},
            "model profile 'azure' (azure) needs `name`: the deployment to call",
        ),
        (
            {"name": "dep", "api_version": "v"},
            "model profile 'azure' (azure) needs `base_url` (the resource endpoint) or AZURE_OPENAI_ENDPOINT",
        ),
        (
            {"name": "dep", "base_url": "https://x.openai.azure.com"},
            "model profile 'azure' (azure) needs `api_version` (or OPENAI_API_VERSION)",
        ),
    ],
)
def test_incomplete_profiles_are_clear_errors(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ModelError, match=re.escape(message)) as caught:
        resolver({}, **fields).for_block(BLOCK)
    assert str(caught.value) == message


def test_missing_key(stub: OpenAIStub) -> None:
    model = resolver({}, name="dep", base_url=stub.base_url, api_version="v").for_block(BLOCK)
    with pytest.raises(
        ModelError, match="needs an API key: set the environment variable AZURE_OPENAI_API_KEY"
    ):
        asyncio.run(model.structured(make_request()))
