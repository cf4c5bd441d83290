"""provider: google through the real langchain-google-genai client (google-genai underneath),
against a loopback server speaking the Gemini REST API; and the documented alternative, Gemini's
OpenAI-compatible endpoint through provider: openai."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from engine.models import ModelError, ModelResolver, is_transient
from engine.models.providers import google as google_provider
from engine.spec import ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.agents.agent_kit import KEY_ENV, run_flow
from tests.agents.agent_kit import PLANTED_KEY as AGENT_KEY
from tests.models.model_helpers import GREETING_SCHEMA, PLANTED_KEY, make_request
from tests.support.cli import in_process
from tests.support.gemini_stub import GeminiReply, GeminiStub
from tests.support.openai_stub import OpenAIStub, Reply

GOOD = {"greeting": "Hello, Ada!", "mood": "happy"}
RETRIED = ["timeout", "rate_limit", "server_error", "connection"]
TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"greeting": {"type": "string"}},
    "required": ["greeting"],
}
Yard = Callable[[dict[str, str]], Path]


@pytest.fixture
def gemini() -> Iterator[GeminiStub]:
    with GeminiStub() as server:
        yield server


def google_model(stub: GeminiStub, env: dict[str, str] | None = None, **fields: Any) -> Any:
    profile = ModelProfile(
        **{
            "provider": "google",
            "name": "gemini-2.5-flash",
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


def ask(model: Any, **request: Any) -> Any:
    return asyncio.run(model.structured(make_request(**request)))


def failure(model: Any) -> ModelError:
    with pytest.raises(
        ModelError, match=r"model profile 'default' \(google, model 'gemini-2.5-flash'\): "
    ) as caught:
        ask(model)
    return caught.value


def test_structured_output_is_a_forced_function_call_over_the_wire(gemini: GeminiStub) -> None:
    gemini.queue(GeminiReply.structured_output(GOOD))
    model = google_model(gemini, temperature=0.2, max_tokens=64, headers={"X-Team": "blocks"})

    assert ask(model) == GOOD
    (sent,) = gemini.requests
    assert sent.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.headers["x-goog-api-key"] == PLANTED_KEY
    assert sent.headers["x-team"] == "blocks"
    assert sent.body["generationConfig"]["temperature"] == 0.2
    assert sent.body["generationConfig"]["maxOutputTokens"] == 64
    assert sent.calling_config == {"mode": "ANY", "allowedFunctionNames": ["greet"]}
    (declaration,) = sent.declarations
    assert declaration["name"] == "greet"
    assert set(declaration["parameters"]["properties"]) == set(GREETING_SCHEMA["properties"])
    assert declaration["parameters"]["properties"]["mood"]["enum"] == ["happy", "calm"]
    assert sent.body["systemInstruction"] == {"parts": [{"text": "You greet people."}]}
    assert sent.contents == [{"role": "user", "parts": [{"text": "Greet Ada."}]}]


def test_a_block_named_like_a_mode_is_still_forced_by_name(gemini: GeminiStub) -> None:
    gemini.queue(GeminiReply.structured_output(GOOD))
    assert ask(google_model(gemini), block="auto") == GOOD
    assert gemini.requests[0].calling_config == {"mode": "ANY", "allowedFunctionNames": ["auto"]}


def test_a_bad_output_is_repaired_by_one_retry(gemini: GeminiStub) -> None:
    gemini.queue(
        GeminiReply.structured_output({"greeting": "Hi", "mood": "grumpy"}),
        GeminiReply.structured_output(GOOD),
    )

    assert ask(google_model(gemini)) == GOOD
    repair = gemini.requests[1].contents
    assert [turn["role"] for turn in repair] == ["user", "model", "user"]
    assert "'grumpy' is not one of ['happy', 'calm']" in repair[2]["parts"][0]["text"]


def test_tokens_are_streamed_as_the_server_sends_them(gemini: GeminiStub) -> None:
    text = "Hello there, Ada: lovely to meet you today."
    gemini.queue(GeminiReply.of_text(text, chunk_delay=0.01))
    tokens: list[tuple[float, str]] = []
    request = dataclasses.replace(
        make_request(TEXT_SCHEMA), on_token=lambda piece: tokens.append((time.monotonic(), piece))
    )

    assert asyncio.run(google_model(gemini).structured(request)) == {"greeting": text}
    assert (
        gemini.requests[0].path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert "".join(piece for _, piece in tokens) == text
    assert len(tokens) == 7  # the stub's pieces of 7 characters, one token each
    assert tokens[-1][0] - tokens[0][0] >= 0.05  # they arrived over time, not at the end


def test_the_api_version_is_fixed_also_behind_a_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    # google-genai 3.6 would send /v1/ (its default) or whatever GOOGLE_GENAI_API_VERSION says: the
    # provider asks for the layout Gemini serves, v1beta, under the gateway's path
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1")
    with GeminiStub(root="/gateway/gemini") as gateway:
        gateway.queue(GeminiReply.structured_output(GOOD), GeminiReply.of_text("Hi"))
        model = google_model(gateway)
        streamed = dataclasses.replace(make_request(TEXT_SCHEMA), on_token=lambda piece: None)

        assert ask(model) == GOOD
        assert asyncio.run(model.structured(streamed)) == {"greeting": "Hi"}
    assert [sent.path for sent in gateway.requests] == [
        "/gateway/gemini/v1beta/models/gemini-2.5-flash:generateContent",
        "/gateway/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    ]


def test_another_version_finds_no_route(
    gemini: GeminiStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the stub serves v1beta only, like the provider asks: a provider drifting to another version fails
    monkeypatch.setattr(google_provider, "GEMINI_API_VERSION", "v1")
    error = failure(google_model(gemini))

    assert error.status == 404 and "no route /v1/models/gemini-2.5-flash:generateContent" in str(
        error
    )
    assert gemini.requests == []


def test_a_client_release_that_cannot_fix_the_version_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import langchain_google_genai

    class Older:  # langchain-google-genai before 4.2.3: no api_version field, the SDK's default would decide
        model_fields: ClassVar[dict[str, Any]] = {"model": None, "base_url": None}

    monkeypatch.setattr(langchain_google_genai, "ChatGoogleGenerativeAI", Older)
    config = ConfigSpec(models={"gemini": ModelProfile(provider="google", name="gemini-2.5-flash")})
    with pytest.raises(ModelError, match=r"needs langchain-google-genai 4.2.3 or later") as caught:
        ModelResolver(config, env={}).for_block(
            LlmBlock(block="greet", kind="llm", model="gemini", prompt=PromptSpec(user="hi"))
        )
    assert str(caught.value) == (
        "provider 'google' needs langchain-google-genai 4.2.3 or later: "
        "pip install -U 'langchain-google-genai>=4.2.3' (model profile 'gemini')"
    )


@pytest.mark.parametrize(
    ("status", "kind", "says"),
    [
        (429, "rate_limit", "rate limited (HTTP 429: quota exhausted for ***)"),
        (500, "server_error", "the server failed (HTTP 500: quota exhausted for ***)"),
        (503, "server_error", "the server failed (HTTP 503: quota exhausted for ***)"),
    ],
)
def test_rate_limits_and_server_errors_are_transient(
    gemini: GeminiStub, status: int, kind: str, says: str
) -> None:
    gemini.queue(GeminiReply.error_reply(status, f"quota exhausted for {PLANTED_KEY}"))
    error = failure(google_model(gemini))

    assert (error.kind, error.status, error.provider) == (kind, status, "google")
    assert str(error) == (
        "flow 'hello', step 'greet': model profile 'default' (google, model "
        f"'gemini-2.5-flash'): {says}"
    )
    assert is_transient(error, RETRIED)
    # no retries inside the client: the step's retry policy decides
    assert len(gemini.requests) == 1


def test_a_rejected_key_is_permanent_and_names_the_variable(gemini: GeminiStub) -> None:
    gemini.queue(GeminiReply.error_reply(401, "API key not valid. Please pass a valid API key."))
    error = failure(google_model(gemini))

    assert str(error).endswith(
        "the server rejected the API key from $STUB_KEY "
        "(HTTP 401: API key not valid. Please pass a valid API key.)"
    )
    assert not is_transient(error, ["any"])


@pytest.mark.parametrize("status", [400, 403, 404])
def test_client_errors_are_never_transient(gemini: GeminiStub, status: int) -> None:
    gemini.queue(GeminiReply.error_reply(status))
    error = failure(google_model(gemini))
    assert error.status == status and not is_transient(error, ["any"])


def test_max_retries_retries_inside_the_client(gemini: GeminiStub) -> None:
    gemini.queue(GeminiReply.error_reply(503), GeminiReply.structured_output(GOOD))
    assert ask(google_model(gemini, max_retries=1)) == GOOD
    assert len(gemini.requests) == 2


def test_a_timeout_is_transient(gemini: GeminiStub) -> None:
    gemini.queue(GeminiReply.slow(5))
    started = time.monotonic()
    error = failure(google_model(gemini, timeout="200ms"))

    assert time.monotonic() - started < 3
    assert error.kind == "timeout" and str(error).endswith("the request timed out after 0.2s")
    assert is_transient(error, ["timeout"])


def test_an_unreachable_server_is_a_connection_error() -> None:
    profile = ModelProfile(
        provider="google",
        name="gemini-2.5-flash",
        base_url="http://127.0.0.1:9",
        api_key_env="STUB_KEY",
    )
    model = ModelResolver(
        ConfigSpec(models={"default": profile}), env={"STUB_KEY": PLANTED_KEY}
    ).for_block(LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi")))
    error = failure(model)

    assert error.kind == "connection" and "cannot connect to http://127.0.0.1:9" in str(error)
    assert is_transient(error, ["connection"])


def test_the_key_comes_from_google_api_key_by_default(gemini: GeminiStub) -> None:
    profile = ModelProfile(provider="google", name="gemini-2.5-flash", base_url=gemini.base_url)
    config = ConfigSpec(models={"default": profile})
    block = LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi"))
    with pytest.raises(
        ModelError, match="needs an API key: set the environment variable GOOGLE_API_KEY"
    ) as caught:
        asyncio.run(ModelResolver(config, env={}).for_block(block).structured(make_request()))
    assert str(caught.value) == (
        "model profile 'default' (google, model 'gemini-2.5-flash') needs an API key: "
        "set the environment variable GOOGLE_API_KEY"
    )
    assert gemini.requests == []

    gemini.queue(GeminiReply.structured_output(GOOD))
    model = ModelResolver(config, env={"GOOGLE_API_KEY": "AIza-from-the-environment"}).for_block(
        block
    )
    assert asyncio.run(model.structured(make_request())) == GOOD
    assert gemini.requests[0].headers["x-goog-api-key"] == "AIza-from-the-environment"


def test_without_the_extra_a_clear_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_google_genai", None)  # as if not installed
    config = ConfigSpec(models={"gemini": ModelProfile(provider="google", name="gemini-2.5-flash")})
    with pytest.raises(ModelError, match="the google extra is not installed") as caught:
        ModelResolver(config, env={}).for_block(
            LlmBlock(block="greet", kind="llm", model="gemini", prompt=PromptSpec(user="hi"))
        )
    assert str(caught.value) == (
        "provider 'google' (model profile 'gemini'): the google extra is not "
        "installed: pip install 'langchain-google-genai>=4.2.3'"
    )


GREET = """
    block: greet
    kind: llm
    inputs: {name: {type: string}}
    outputs: {greeting: {type: string}}
    prompt: {system: You greet people., user: "Greet {{ name }}."}
"""
HELLO = """
    flow: hello
    inputs: {name: {type: string}}
    outputs: [greeting]
    steps:
      - {id: greet, uses: greet}
"""


def greet_yard(make_yard: Yard, base_url: str) -> Path:
    config = (
        f"models:\n  default:\n    provider: google\n    name: gemini-2.5-flash\n    base_url: {base_url}\n"
        f"    api_key_env: {KEY_ENV}\n"
    )
    return make_yard(
        {"blockyard.yaml": config, "blocks/greet.yaml": GREET, "flows/hello.yaml": HELLO}
    )


def test_the_cli_validates_a_google_profile_and_names_a_missing_extra_in_one_line(
    make_yard: Yard,
    gemini: GeminiStub,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = greet_yard(make_yard, gemini.base_url)
    cli = in_process(capsys)
    assert cli(root, "validate").code == 0

    monkeypatch.setenv(KEY_ENV, AGENT_KEY)
    monkeypatch.setitem(sys.modules, "langchain_google_genai", None)  # as if not installed
    outcome = cli(root, "run", "hello", "--input", "name=Ada")

    assert outcome.code == 1
    assert (
        "the google extra is not installed: pip install 'langchain-google-genai>=4.2.3'"
        in outcome.err
    )
    assert "Traceback" not in outcome.err + outcome.out
    assert gemini.requests == []


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


def test_an_agent_calls_a_tool_and_answers_through_gemini(
    make_yard: Yard, gemini: GeminiStub
) -> None:
    config = (
        f"models:\n  default:\n    provider: google\n    name: gemini-2.5-flash\n"
        f"    base_url: {gemini.base_url}\n    api_key_env: {KEY_ENV}\n"
    )
    root = make_yard(
        {"blockyard.yaml": config, "blocks/helper.yaml": HELPER, "flows/ask.yaml": ASK}
    )
    gemini.queue(
        GeminiReply.function_calls(
            ("current_time", {"timezone": "Europe/Paris"}), text="Let me check."
        ),
        GeminiReply.function_calls(("final_answer", {"answer": "It is late."})),
    )
    done = run_flow(root, "ask", {"question": "What time is it?"})

    assert done.outputs == {"answer": "It is late."}, done.error
    first, second = gemini.requests
    assert first.streamed and second.streamed
    assert [d["name"] for d in first.declarations] == ["current_time", "final_answer"]
    assert first.headers["x-goog-api-key"] == AGENT_KEY
    # the round trip: the model's call goes back to it, followed by the tool's result
    called, answered = second.contents[-2:]
    assert called["role"] == "model"
    calls = [
        (part["functionCall"]["name"], part["functionCall"]["args"])
        for part in called["parts"]
        if "functionCall" in part
    ]
    assert calls == [("current_time", {"timezone": "Europe/Paris"})]
    (response,) = [part["functionResponse"] for part in answered["parts"]]
    assert response["name"] == "current_time"
    assert "Europe/Paris" in str(response["response"])
    assert [e.data["tool"] for e in done.of("tool_call") if e.data["status"] == "ok"] == [
        "current_time",
        "final_answer",
    ]
    assert "".join(e.data["text"] for e in done.of("token")).startswith("Let me check.")
    stored = "".join(
        p.read_bytes().decode("latin-1") for p in (root / ".blockyard").rglob("*") if p.is_file()
    )
    assert AGENT_KEY not in stored + "".join(e.to_json() for e in done.events)


def test_gemini_through_its_openai_compatible_endpoint_needs_no_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/models.md: provider openai, Gemini's OpenAI-compatible base_url, the key from GEMINI_API_KEY
    monkeypatch.setitem(sys.modules, "langchain_google_genai", None)
    with OpenAIStub() as stub:
        base_url = f"http://127.0.0.1:{stub.port}/v1beta/openai/"
        profile = ModelProfile(
            provider="openai",
            name="gemini-2.5-flash",
            base_url=base_url,
            api_key_env="GEMINI_API_KEY",
        )
        model = ModelResolver(
            ConfigSpec(models={"default": profile}), env={"GEMINI_API_KEY": PLANTED_KEY}
        ).for_block(LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi")))
        stub.queue(Reply.structured_output(GOOD))

        assert ask(model) == GOOD
        (sent,) = stub.requests
        assert sent.path == "/v1beta/openai/chat/completions"
        assert sent.headers["authorization"] == f"Bearer {PLANTED_KEY}"
        assert sent.body["model"] == "gemini-2.5-flash"
        assert sent.forced_tool == "greet"
