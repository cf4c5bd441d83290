"""Which profile a block gets, the `default` rules, the CLI note, client caching (the anthropic extra's
missing install: tests/models/test_anthropic_provider.py)."""

from __future__ import annotations

import asyncio

import pytest

from engine.models import MOCK_NOTE, ModelError, ModelResolver
from engine.spec import ConfigSpec, DecideBlock, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import make_request
from tests.support.openai_stub import OpenAIStub, Reply

BLOCK = LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi"))


def test_nothing_configured_and_no_key_is_the_mock_with_a_note() -> None:
    resolver = ModelResolver(ConfigSpec(), env={})
    assert resolver.profile(BLOCK) == ("default", ModelProfile(provider="mock"))
    assert resolver.default_note == MOCK_NOTE
    assert MOCK_NOTE == (
        "no model configured: using the offline mock model (set OPENAI_API_KEY or add a "
        "`default` profile to blockyard.yaml)"
    )


def test_a_key_in_the_environment_makes_the_default_openai() -> None:
    resolver = ModelResolver(ConfigSpec(), env={"OPENAI_API_KEY": "sk-x"})
    assert resolver.profile(BLOCK) == (
        "default",
        ModelProfile(provider="openai", name="gpt-4o-mini"),
    )
    assert resolver.default_note is None
    chosen = ModelResolver(
        ConfigSpec(), env={"OPENAI_API_KEY": "sk-x", "BLOCKYARD_DEFAULT_MODEL": "gpt-4.1"}
    )
    assert chosen.profile(BLOCK)[1].name == "gpt-4.1"


def test_a_configured_default_wins_even_when_it_is_the_mock() -> None:
    config = ConfigSpec(models={"default": ModelProfile(provider="mock", name="fake")})
    resolver = ModelResolver(config, env={"OPENAI_API_KEY": "sk-x"})
    assert resolver.profile(BLOCK)[1].name == "fake"
    assert resolver.default_note is None


def test_named_and_inline_profiles() -> None:
    fast = ModelProfile(provider="mock", name="fast")
    resolver = ModelResolver(ConfigSpec(models={"fast": fast}), env={})
    assert resolver.profile(BLOCK.model_copy(update={"model": "fast"})) == ("fast", fast)
    inline = ModelProfile(provider="mock", name="inline-one")
    assert resolver.profile(BLOCK.model_copy(update={"model": inline})) == ("greet:inline", inline)


def test_unknown_profile_suggests_a_name() -> None:
    resolver = ModelResolver(ConfigSpec(models={"fast": ModelProfile(provider="mock")}), env={})
    with pytest.raises(
        ModelError, match=r"uses model profile 'fsat', which blockyard.yaml does not define"
    ) as caught:
        resolver.for_block(BLOCK.model_copy(update={"model": "fsat"}))
    assert str(caught.value) == (
        "block 'greet' uses model profile 'fsat', which blockyard.yaml does not define "
        "(did you mean 'fast'?)"
    )


def test_clients_are_cached_per_profile() -> None:
    resolver = ModelResolver(ConfigSpec(models={"fast": ModelProfile(provider="mock")}), env={})
    other = LlmBlock(block="shout", kind="llm", model="fast", prompt=PromptSpec(user="hi"))
    assert resolver.for_block(BLOCK) is resolver.for_block(
        DecideBlock(block="x", kind="decide", prompt=PromptSpec(user="hi"))
    )
    assert resolver.for_block(other) is resolver.for_block(other.model_copy(update={"block": "y"}))
    assert resolver.for_block(other) is not resolver.for_block(BLOCK)


def test_the_default_openai_profile_talks_to_the_configured_endpoint(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the SDK reads OPENAI_BASE_URL from the process environment when the profile has no base_url
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    resolver = ModelResolver(ConfigSpec(), env={"OPENAI_API_KEY": "sk-env"})
    stub.queue(Reply.structured_output({"greeting": "hi", "mood": "calm"}))
    assert asyncio.run(resolver.for_block(BLOCK).structured(make_request())) == {
        "greeting": "hi",
        "mood": "calm",
    }
    assert stub.requests[0].body["model"] == "gpt-4o-mini"
    assert stub.requests[0].headers["authorization"] == "Bearer sk-env"
