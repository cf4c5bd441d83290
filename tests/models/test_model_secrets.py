"""The API key never shows up in messages, reprs, tracebacks or logs — even when a server echoes it."""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

import pytest

from engine.models import ModelError, ModelResolver
from engine.spec import ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import PLANTED_KEY, make_request
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply


def echo_key(status: int) -> Reply:
    """A careless server that repeats the Authorization header in its error message."""

    def answer(request: RecordedRequest) -> Reply:
        return Reply.error_reply(status, f"invalid credentials: {request.headers['authorization']}")

    return Reply.dynamic(answer)


def everything_about(exc: BaseException, *objects: Any) -> str:
    texts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    texts += [repr(o) for o in objects] + [str(o) for o in objects]
    return "\n".join(texts)


@pytest.mark.parametrize("status", [401, 403, 500, 429])
def test_echoed_key_is_masked(
    stub: OpenAIStub, openai_model: Any, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    caplog.set_level(logging.DEBUG)
    model = openai_model()
    stub.queue(echo_key(status))
    with pytest.raises(
        ModelError, match=r"model profile 'default' \(openai, model 'stub-model'\): "
    ) as caught:
        asyncio.run(model.structured(make_request()))

    # it was really sent
    assert stub.requests[0].headers["authorization"] == f"Bearer {PLANTED_KEY}"
    assert "invalid credentials: Bearer ***" in str(caught.value)
    text = everything_about(caught.value, model, model.generator)
    assert PLANTED_KEY not in text
    assert PLANTED_KEY not in caplog.text


def test_key_absent_from_timeout_and_connection_errors(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.structured_output({}, delay=5))
    with pytest.raises(ModelError, match="the request timed out after") as timeout:
        asyncio.run(openai_model(timeout="100ms").structured(make_request()))
    assert PLANTED_KEY not in everything_about(timeout.value)

    profile = ModelProfile(
        provider="openai", name="m", base_url="http://127.0.0.1:9/v1", api_key_env="K"
    )
    resolver = ModelResolver(ConfigSpec(models={"default": profile}), env={"K": PLANTED_KEY})
    model = resolver.for_block(LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi")))
    with pytest.raises(ModelError, match=r"cannot connect to http://127.0.0.1:9/v1") as refused:
        asyncio.run(model.structured(make_request()))
    assert PLANTED_KEY not in everything_about(
        refused.value, resolver, model, getattr(model, "generator", None)
    )


def test_profiles_hold_no_key(stub: OpenAIStub, openai_model: Any) -> None:
    model = openai_model()
    stub.queue(Reply.structured_output({"greeting": "hi", "mood": "calm"}))
    asyncio.run(model.structured(make_request()))
    # after a call the client exists; its LangChain repr shows a SecretStr mask, ours shows the variable only
    generator = model.generator
    assert "STUB_KEY" in repr(generator)
    assert PLANTED_KEY not in repr(generator._client)
    held = {
        name: value for name, value in vars(generator).items() if name != "_env"
    }  # _env is the environment
    assert PLANTED_KEY not in repr(held)
