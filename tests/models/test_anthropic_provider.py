"""provider: anthropic through the real langchain-anthropic client (the anthropic SDK underneath),
against a loopback server speaking Anthropic's Messages API: what a profile sets reaches the wire,
failures become one clear ModelError, an agent's tool calls go round."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.models import ModelError, ModelResolver, is_transient
from engine.spec import ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.agents.agent_kit import KEY_ENV, run_flow
from tests.agents.agent_kit import PLANTED_KEY as AGENT_KEY
from tests.models.model_helpers import GREETING_SCHEMA, PLANTED_KEY, make_request
from tests.support.anthropic_stub import AnthropicReply, AnthropicRequest, AnthropicStub

MODEL = "claude-sonnet-5"  # not one the SDK warns is deprecated
GOOD = {"greeting": "Hello, Ada!", "mood": "happy"}
RETRIED = ["timeout", "rate_limit", "server_error", "connection"]
TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"greeting": {"type": "string"}},
    "required": ["greeting"],
}
Yard = Callable[[dict[str, str]], Path]


@pytest.fixture
def claude() -> Iterator[AnthropicStub]:
    with AnthropicStub() as server:
        yield server


def anthropic_model(stub: AnthropicStub, env: dict[str, str] | None = None, **fields: Any) -> Any:
    profile = ModelProfile(
        **{
            "provider": "anthropic",
            "name": MODEL,
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


def key_sent(request: AnthropicRequest) -> str | None:
    """The API key a request carried: `x-api-key`, or the bearer token newer SDK releases send."""
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
    return request.headers.get("x-api-key") or bearer or None


def ask(model: Any, **request: Any) -> Any:
    return asyncio.run(model.structured(make_request(**request)))


def failure(model: Any) -> ModelError:
    with pytest.raises(
        ModelError, match=rf"model profile 'default' \(anthropic, model '{MODEL}'\): "
    ) as caught:
        ask(model)
    return caught.value


def test_structured_output_is_a_tool_forced_by_name_over_the_wire(claude: AnthropicStub) -> None:
    claude.queue(AnthropicReply.structured_output(GOOD))
    model = anthropic_model(claude, temperature=0.2, headers={"X-Team": "blocks"})

    assert ask(model) == GOOD
    (sent,) = claude.requests
    assert sent.path == "/v1/messages" and not sent.streamed
    assert key_sent(sent) == PLANTED_KEY
    assert sent.headers["x-team"] == "blocks"
    assert sent.body["model"] == MODEL
    assert sent.body["temperature"] == 0.2
    assert sent.body["max_tokens"] == 1024  # Anthropic requires a bound: the provider's default
    assert sent.body["tool_choice"] == {"type": "tool", "name": "greet"}
    (tool,) = sent.tools
    assert tool["name"] == "greet"
    assert tool["input_schema"]["properties"] == GREETING_SCHEMA["properties"]
    assert sent.body["system"] == "You greet people."
    assert sent.messages == [{"role": "user", "content": "Greet Ada."}]


def test_unset_settings_are_left_to_the_client(claude: AnthropicStub) -> None:
    claude.queue(AnthropicReply.structured_output(GOOD))
    assert ask(anthropic_model(claude, max_tokens=64)) == GOOD
    (sent,) = claude.requests
    assert sent.body["max_tokens"] == 64
    assert "temperature" not in sent.body  # no temperature in the profile: the server's own
    assert "x-team" not in sent.headers


def test_a_block_named_like_a_choice_is_still_forced_by_name(claude: AnthropicStub) -> None:
    claude.queue(AnthropicReply.structured_output(GOOD))
    assert ask(anthropic_model(claude), block="required") == GOOD
    assert claude.requests[0].body["tool_choice"] == {"type": "tool", "name": "required"}


def test_a_gateway_keeps_its_path() -> None:
    with AnthropicStub(root="/gateway/anthropic") as gateway:
        gateway.queue(AnthropicReply.structured_output(GOOD))
        assert ask(anthropic_model(gateway)) == GOOD
    assert [sent.path for sent in gateway.requests] == ["/gateway/anthropic/v1/messages"]


def test_a_bad_output_is_repaired_by_one_retry(claude: AnthropicStub) -> None:
    claude.queue(
        AnthropicReply.structured_output({"greeting": "Hi", "mood": "grumpy"}),
        AnthropicReply.structured_output(GOOD),
    )

    assert ask(anthropic_model(claude)) == GOOD
    repair = claude.requests[1].messages
    assert [turn["role"] for turn in repair] == ["user", "assistant", "user"]
    assert "'grumpy' is not one of ['happy', 'calm']" in str(repair[2]["content"])


def test_tokens_are_streamed_as_the_server_sends_them(claude: AnthropicStub) -> None:
    text = "Hello there, Ada: lovely to meet you today."
    claude.queue(AnthropicReply.of_text(text, chunk_delay=0.03))
    tokens: list[tuple[float, str]] = []
    request = dataclasses.replace(
        make_request(TEXT_SCHEMA), on_token=lambda piece: tokens.append((time.monotonic(), piece))
    )

    assert asyncio.run(anthropic_model(claude).structured(request)) == {"greeting": text}
    assert claude.requests[0].streamed
    assert "".join(piece for _, piece in tokens) == text
    assert len(tokens) == 7  # the stub's pieces of 7 characters, one token each
    # they arrived over time (6 gaps of 0.03 s), not at the end
    assert tokens[-1][0] - tokens[0][0] >= 0.1


@pytest.mark.parametrize(
    ("status", "kind", "says"),
    [
        (429, "rate_limit", "rate limited (HTTP 429: quota exhausted for ***)"),
        (500, "server_error", "the server failed (HTTP 500: quota exhausted for ***)"),
        (503, "server_error", "the server failed (HTTP 503: quota exhausted for ***)"),
    ],
)
def test_rate_limits_and_server_errors_are_transient(
    claude: AnthropicStub, status: int, kind: str, says: str
) -> None:
    claude.queue(AnthropicReply.error_reply(status, f"quota exhausted for {PLANTED_KEY}"))
    error = failure(anthropic_model(claude))

    assert (error.kind, error.status, error.provider) == (kind, status, "anthropic")
    assert (
        str(error)
        == f"flow 'hello', step 'greet': model profile 'default' (anthropic, model '{MODEL}'): {says}"
    )
    assert is_transient(error, RETRIED)
    # no retries inside the client: the step's retry policy decides
    assert len(claude.requests) == 1


def test_a_rejected_key_is_permanent_and_names_the_variable(claude: AnthropicStub) -> None:
    claude.queue(AnthropicReply.error_reply(401, "invalid x-api-key"))
    error = failure(anthropic_model(claude))

    assert str(error).endswith(
        "the server rejected the API key from $STUB_KEY (HTTP 401: invalid x-api-key)"
    )
    assert not is_transient(error, ["any"])


@pytest.mark.parametrize("status", [400, 403, 404])
def test_client_errors_are_never_transient(claude: AnthropicStub, status: int) -> None:
    claude.queue(AnthropicReply.error_reply(status))
    error = failure(anthropic_model(claude))
    assert error.status == status and not is_transient(error, ["any"])


def test_max_retries_retries_inside_the_client(claude: AnthropicStub) -> None:
    claude.queue(AnthropicReply.error_reply(503), AnthropicReply.structured_output(GOOD))
    assert ask(anthropic_model(claude, max_retries=1)) == GOOD
    assert len(claude.requests) == 2


def test_a_timeout_is_transient(claude: AnthropicStub) -> None:
    claude.queue(AnthropicReply.slow(5))
    started = time.monotonic()
    error = failure(anthropic_model(claude, timeout="200ms"))

    assert time.monotonic() - started < 3
    assert error.kind == "timeout" and str(error).endswith("the request timed out after 0.2s")
    assert is_transient(error, ["timeout"])


def test_an_unreachable_server_is_a_connection_error() -> None:
    profile = ModelProfile(
        provider="anthropic", name=MODEL, base_url="http://127.0.0.1:9", api_key_env="STUB_KEY"
    )
    model = ModelResolver(
        ConfigSpec(models={"default": profile}), env={"STUB_KEY": PLANTED_KEY}
    ).for_block(LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi")))
    error = failure(model)

    assert error.kind == "connection" and "cannot connect to http://127.0.0.1:9" in str(error)
    assert is_transient(error, ["connection"])


def test_the_key_comes_from_anthropic_api_key_by_default(claude: AnthropicStub) -> None:
    config = ConfigSpec(
        models={"default": ModelProfile(provider="anthropic", name=MODEL, base_url=claude.base_url)}
    )
    block = LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi"))
    with pytest.raises(
        ModelError, match="needs an API key: set the environment variable ANTHROPIC_API_KEY"
    ):
        asyncio.run(ModelResolver(config, env={}).for_block(block).structured(make_request()))
    assert claude.requests == []

    claude.queue(AnthropicReply.structured_output(GOOD))
    model = ModelResolver(
        config, env={"ANTHROPIC_API_KEY": "sk-ant-from-the-environment"}
    ).for_block(block)
    assert asyncio.run(model.structured(make_request())) == GOOD
    assert key_sent(claude.requests[0]) == "sk-ant-from-the-environment"


def test_a_profile_without_a_model_name_is_refused() -> None:
    config = ConfigSpec(models={"claude": ModelProfile(provider="anthropic")})
    with pytest.raises(ModelError, match="needs `name`") as caught:
        ModelResolver(config, env={}).for_block(
            LlmBlock(block="greet", kind="llm", model="claude", prompt=PromptSpec(user="hi"))
        )
    assert (
        str(caught.value)
        == "model profile 'claude' (anthropic) needs `name`, e.g. claude-sonnet-4-5"
    )


def test_without_the_extra_a_clear_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)  # as if not installed
    config = ConfigSpec(models={"claude": ModelProfile(provider="anthropic", name=MODEL)})
    with pytest.raises(ModelError, match="the anthropic extra is not installed") as caught:
        ModelResolver(config, env={}).for_block(
            LlmBlock(block="greet", kind="llm", model="claude", prompt=PromptSpec(user="hi"))
        )
    assert str(caught.value) == (
        "provider 'anthropic' (model profile 'claude'): the anthropic extra is not "
        "installed: pip install 'langchain-anthropic>=1.0'"
    )


HELPER = """
    block: helper
    kind: agent
    description: Answers a question with tools.
    inputs: {question: {type: string}}
    outputs: {answer: {type: string}}
    prompt:
      system: You are the helper.
      user: "{{ question }}"
    tools: [current_time]
    max_iterations: 4
"""
ASK = """
    flow: ask
    inputs: {question: {type: string}}
    outputs: [answer]
    steps:
      - {id: lead, uses: helper}
"""


def test_an_agent_calls_a_tool_and_answers_through_claude(
    make_yard: Yard, claude: AnthropicStub
) -> None:
    config = (
        f"models:\n  default:\n    provider: anthropic\n    name: {MODEL}\n"
        f"    base_url: {claude.base_url}\n    api_key_env: {KEY_ENV}\n"
    )
    root = make_yard(
        {"blockyard.yaml": config, "blocks/helper.yaml": HELPER, "flows/ask.yaml": ASK}
    )
    claude.queue(
        AnthropicReply.tool_calls(
            ("current_time", {"timezone": "Europe/Paris"}), text="Let me check."
        ),
        AnthropicReply.tool_calls(("final_answer", {"answer": "It is late."})),
    )
    done = run_flow(root, "ask", {"question": "What time is it?"})

    assert done.outputs == {"answer": "It is late."}, done.error
    first, second = claude.requests
    assert first.streamed and second.streamed
    assert [tool["name"] for tool in first.tools] == ["current_time", "final_answer"]
    assert key_sent(first) == AGENT_KEY
    # the round trip: the model's call goes back to it, followed by the tool's result
    called, answered = second.messages[-2:]
    assert called["role"] == "assistant"
    calls = [
        (part["name"], part["input"]) for part in called["content"] if part["type"] == "tool_use"
    ]
    assert calls == [("current_time", {"timezone": "Europe/Paris"})]
    (result,) = [part for part in answered["content"] if part["type"] == "tool_result"]
    assert result["tool_use_id"] == "toolu_0"
    assert "Europe/Paris" in str(result["content"])
    assert [e.data["tool"] for e in done.of("tool_call") if e.data["status"] == "ok"] == [
        "current_time",
        "final_answer",
    ]
    assert "".join(e.data["text"] for e in done.of("token")).startswith("Let me check.")
    stored = "".join(
        p.read_bytes().decode("latin-1") for p in (root / ".blockyard").rglob("*") if p.is_file()
    )
    assert AGENT_KEY not in stored + "".join(e.to_json() for e in done.events)
