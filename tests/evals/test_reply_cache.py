"""The response cache of `blockyard eval` at the one place every model call passes (engine/models/calls.py,
`Metered`): a reply asked for again comes from the folder without a call, recorded as a call marked
cached with the reply's tokens and cost, its text streamed again; another setting or request is another
key; a scripted mock is never kept; an agent's turn comes back as the same message; and the folder
never holds the API key the calls were made with."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from engine.core.usage import ModelCall
from engine.evals.cache import FolderCache
from engine.models.agentic import TurnRequest
from engine.models.base import Candidate, StructuredRequest, Turn
from engine.models.cached import caching, generation_settings
from engine.models.calls import Metered, recording
from engine.models.pricing import Price
from engine.models.providers.mock import MockGenerator
from engine.models.resolver import ModelResolver
from engine.spec import ConfigSpec, ModelProfile
from tests.support.openai_stub import OpenAIStub, Reply

SCHEMA = {
    "type": "object",
    "properties": {"greeting": {"type": "string"}},
    "required": ["greeting"],
}
PRICE = Price(1e-6, 2e-6, None, "profile")


class Counting:
    """A provider that counts the calls that reach it."""

    provider = "mock"

    def __init__(self, inner: MockGenerator) -> None:
        self.inner = inner
        self.model = inner.model
        self.calls = 0
        self.fail = False  # raise, as a dropped connection would

    @property
    def scripted(self) -> bool:
        return self.inner.scripted

    async def generate(self, request: StructuredRequest, turns: tuple[Turn, ...]) -> Candidate:
        self.calls += 1
        if self.fail:
            raise RuntimeError("the connection dropped")
        return await self.inner.generate(request, turns)

    async def turn(self, request: TurnRequest, on_token: Any = None) -> Any:
        self.calls += 1
        return await self.inner.turn(request, on_token)


class Calls:
    def __init__(self) -> None:
        self.made: list[dict[str, Any]] = []

    def before(self, purpose: str) -> None:
        pass

    def after(self, call: ModelCall) -> None:
        self.made.append(call.as_data())


def request(user: str = "Greet Ada.", tokens: list[str] | None = None) -> StructuredRequest:
    return StructuredRequest(
        flow="hello",
        step="greet",
        block="greet",
        system="Be warm.",
        user=user,
        output_schema=SCHEMA,
        inputs={"name": "Ada"},
        on_token=tokens.append if tokens is not None else None,
    )


def metered(profile: ModelProfile | None = None) -> tuple[Metered, Counting]:
    profile = profile or ModelProfile(provider="mock")
    inner = Counting(MockGenerator(profile))
    return Metered(
        inner, profile="default", price=PRICE, settings=generation_settings(profile)
    ), inner


def ask(
    model: Metered, cache: FolderCache | None, asked: StructuredRequest, calls: Calls
) -> Candidate:
    async def main() -> Candidate:
        with caching(cache), recording(calls):
            return await model.generate(asked, ())

    return asyncio.run(main())


def test_a_reply_asked_again_comes_from_the_cache_without_a_call(tmp_path: Path) -> None:
    cache = FolderCache(tmp_path / "cache")
    model, inner = metered()
    calls = Calls()
    first_tokens: list[str] = []
    first = ask(model, cache, request(tokens=first_tokens), calls)
    again_tokens: list[str] = []
    again = ask(model, cache, request(tokens=again_tokens), calls)
    assert inner.calls == 1
    assert (again.value, again.text, again.parsed, again.usage) == (
        first.value,
        first.text,
        first.parsed,
        first.usage,
    )
    assert again_tokens == first_tokens and "".join(first_tokens) == first.value["greeting"]
    made, replayed = calls.made
    assert "cached" not in made and replayed["cached"] is True
    assert replayed["original_latency_ms"] == round(made["latency_ms"], 1)
    for key in (
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "price_source",
        "provider",
        "model",
        "purpose",
    ):
        # what the call costs with the model, as when it was made
        assert replayed[key] == made[key], key
    assert replayed["cost_usd"] > 0
    assert cache.stats.as_dict() == {"hits": 1, "misses": 1, "writes": 1, "errors": 0}
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 1


def test_another_request_or_setting_is_another_key(tmp_path: Path) -> None:
    cache = FolderCache(tmp_path / "cache")
    calls = Calls()
    model, inner = metered()
    ask(model, cache, request(), calls)
    ask(model, cache, request(user="Greet Ada warmly."), calls)
    warmer, warmer_inner = metered(ModelProfile(provider="mock", temperature=0.9))
    ask(warmer, cache, request(), calls)
    assert (inner.calls, warmer_inner.calls) == (2, 1)
    assert cache.stats.hits == 0 and len(list((tmp_path / "cache").rglob("*.json"))) == 3
    # a header or a key variable is not part of it: the same reply
    ask(model, cache, request(), calls)
    headers, _ = metered(
        ModelProfile(provider="mock", headers={"X-Team": "a"}, api_key_env="OTHER_KEY")
    )
    ask(headers, cache, request(), calls)
    assert cache.stats.hits == 2


def test_no_cache_and_a_scripted_mock_always_call(tmp_path: Path) -> None:
    calls = Calls()
    model, inner = metered()
    ask(model, None, request(), calls)
    ask(model, None, request(), calls)
    cache = FolderCache(tmp_path / "cache")
    scripted, scripted_inner = metered(
        ModelProfile(provider="mock", replies={"greet": [{"greeting": "a"}, {"greeting": "b"}]})
    )
    assert [ask(scripted, cache, request(), calls).value for _ in range(2)] == [
        {"greeting": "a"},
        {"greeting": "b"},
    ]
    assert (inner.calls, scripted_inner.calls) == (2, 2)
    assert not (tmp_path / "cache").exists()
    assert not any(call.get("cached") for call in calls.made)


def test_an_agent_turn_comes_back_as_the_same_message(tmp_path: Path) -> None:
    cache = FolderCache(tmp_path / "cache")
    model, inner = metered()
    calls = Calls()
    answer = {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
        "required": ["facts"],
    }
    turn = TurnRequest(
        flow="research",
        step="dig",
        block="researcher",
        messages=(SystemMessage("Find facts."), HumanMessage("Bees")),
        tools=({"type": "function", "function": {"name": "final_answer", "parameters": answer}},),
        answer_tool="final_answer",
        answer_schema=answer,
        inputs={"topic": "bees"},
    )

    async def main() -> Any:
        with caching(cache), recording(calls):
            return await model.turn(turn)

    first, again = asyncio.run(main()), asyncio.run(main())
    assert inner.calls == 1
    assert type(again) is type(first)
    assert (again.content, again.tool_calls, again.usage_metadata) == (
        first.content,
        first.tool_calls,
        first.usage_metadata,
    )
    assert [call.get("cached") for call in calls.made] == [None, True]
    assert calls.made[1]["turn"] == 1 and calls.made[1]["purpose"] == "agent"


def test_the_cache_never_holds_the_api_key(tmp_path: Path) -> None:
    secret = "sk-cache-test-secret-0042"
    cache = FolderCache(tmp_path / "cache")
    with OpenAIStub() as stub:
        stub.default = Reply.structured_output({"greeting": "Hello Ada!"})
        config = ConfigSpec.model_validate(
            {
                "models": {
                    "default": {
                        "provider": "openai",
                        "name": "gpt-test",
                        "base_url": stub.base_url,
                        "api_key_env": "CACHE_TEST_KEY",
                        "headers": {"X-Api-Key": secret},
                    }
                }
            }
        )
        client = ModelResolver(config, {"CACHE_TEST_KEY": secret}).for_profile("default")

        async def main() -> dict[str, Any]:
            with caching(cache), recording(Calls()):
                return await client.structured(request())

        assert asyncio.run(main()) == {"greeting": "Hello Ada!"}
        assert asyncio.run(main()) == {"greeting": "Hello Ada!"}
        assert len(stub.requests) == 1  # the second came from the cache
        assert stub.requests[0].headers["authorization"] == f"Bearer {secret}"
    kept = [path.read_bytes() for path in (tmp_path / "cache").rglob("*") if path.is_file()]
    assert len(kept) == 1
    assert all(secret.encode() not in text for text in kept)
    # an endpoint's user and password are no part of a key either (keys are hashed, never kept, anyway)
    endpoint = generation_settings(
        ModelProfile(provider="openai", base_url="https://user:hunter2@llm.example/v1")
    )
    assert endpoint["base_url"] == "https://llm.example/v1"


def test_the_same_request_asked_twice_at_once_makes_one_call(tmp_path: Path) -> None:
    cache = FolderCache(tmp_path / "cache")
    model, inner = metered(ModelProfile(provider="mock", delay="50ms"))
    failing, failing_inner = metered(ModelProfile(provider="mock", name="other"))
    calls = Calls()

    async def main() -> list[Any]:
        with caching(cache), recording(calls):
            return list(await asyncio.gather(*(model.generate(request(), ()) for _ in range(3))))

    replies = asyncio.run(main())
    assert inner.calls == 1 and len({str(reply.value) for reply in replies}) == 1
    assert [call.get("cached", False) for call in calls.made] == [False, True, True]
    assert cache.stats.as_dict() == {"hits": 2, "misses": 1, "writes": 1, "errors": 0}

    async def fail_then_ask() -> Any:
        with caching(cache), recording(calls):
            failing_inner.fail = True
            with contextlib.suppress(RuntimeError):
                await failing.generate(request(), ())
            failing_inner.fail = False
            return await asyncio.wait_for(failing.generate(request(), ()), 10)

    assert asyncio.run(
        fail_then_ask()
    ).parsed  # the failed call left its key free: asked again, answered
    assert failing_inner.calls == 2
