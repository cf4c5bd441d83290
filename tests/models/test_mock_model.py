"""provider: mock — deterministic, derived from the inputs, scriptable, offline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.models import (
    MockScript,
    ModelError,
    ModelOutputError,
    ModelResolver,
    StructuredRequest,
    is_transient,
    scripted,
)
from engine.spec import ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import make_request

DECIDE = {
    "type": "object",
    "properties": {"route": {"type": "string", "enum": ["fix", "ship", "review"]}},
    "required": ["route"],
    "additionalProperties": False,
}
MANY = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "score": {"type": "number"}},
    "required": ["summary", "score"],
    "additionalProperties": False,
}


def mock(**fields: Any) -> Any:
    profile = ModelProfile(provider="mock", **fields)
    return ModelResolver(ConfigSpec(models={"default": profile}), env={}).for_block(
        LlmBlock(block="b", kind="llm", prompt=PromptSpec(user="hi"))
    )


def ask(
    model: Any, schema: dict[str, Any], *, step: str = "s", block: str = "b", inputs: Any = None
) -> Any:
    request = make_request(schema, step=step, block=block, inputs=inputs)
    return asyncio.run(model.structured(request))


def test_same_inputs_same_output_and_strings_summarize_inputs() -> None:
    first = ask(mock(), MANY, inputs={"text": "a long story", "n": 3})
    again = ask(mock(), MANY, inputs={"n": 3, "text": "a long story"})
    other = ask(mock(), MANY, inputs={"text": "another story", "n": 3})
    assert first == again
    assert first["summary"] == "b: n=3, text=a long story"
    assert other != first


def test_enum_choice_is_stable_and_varies_with_inputs() -> None:
    choices = [ask(mock(), DECIDE, inputs={"ticket": i})["route"] for i in range(30)]
    assert choices == [ask(mock(), DECIDE, inputs={"ticket": i})["route"] for i in range(30)]
    assert set(choices) == {"fix", "ship", "review"}


def test_scripted_replies_are_used_in_order_then_the_last_repeats() -> None:
    model = mock(replies={"s": [{"route": "fix"}, "review"], "other_block": ["ship"]})
    assert [ask(model, DECIDE)["route"] for _ in range(4)] == ["fix", "review", "review", "review"]
    assert ask(model, DECIDE, step="t", block="other_block") == {"route": "ship"}


def test_flow_qualified_keys_win_over_step_and_block() -> None:
    model = mock(replies={"hello.s": ["ship"], "s": ["fix"], "b": ["review"]})
    assert ask(model, DECIDE) == {"route": "ship"}
    assert ask(model, DECIDE, step="elsewhere") == {"route": "review"}


def test_a_scripted_reply_failing_the_schema_is_repaired_by_the_next_one() -> None:
    model = mock(replies={"s": ["maybe", "ship"]})
    assert ask(model, DECIDE) == {"route": "ship"}


def test_a_bad_scripted_reply_twice_is_a_model_output_error() -> None:
    model = mock(replies={"s": ["not json at all"]})
    with pytest.raises(
        ModelOutputError, match="does not match its outputs, even after a retry"
    ) as caught:
        ask(model, MANY)
    assert str(caught.value) == (
        "flow 'hello', step 's': block 'b' got output from mock model 'mock' that does "
        "not match its outputs, even after a retry: the reply is not JSON: "
        "'not json at all'"
    )


def test_json_text_replies_are_parsed() -> None:
    model = mock(replies={"s": ['{"summary": "scripted", "score": 0.5}']})
    assert ask(model, MANY) == {"summary": "scripted", "score": 0.5}


def test_scripted_errors_are_classified() -> None:
    model = mock(replies={"s": [{"$error": "rate_limit", "message": "quota"}, {"$error": "boom"}]})
    with pytest.raises(ModelError, match="mock model 'mock', step 's': quota") as first:
        ask(model, DECIDE)
    assert str(first.value) == "mock model 'mock', step 's': quota"
    assert is_transient(first.value, ["rate_limit"])
    with pytest.raises(
        ModelError, match="mock model 'mock', step 's': scripted boom error"
    ) as second:
        ask(model, DECIDE)
    assert not is_transient(second.value, ["any"])


def test_delay_is_honoured() -> None:
    model = mock(delay="150ms")

    async def timed() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await model.structured(make_request(DECIDE))
        return loop.time() - start

    assert asyncio.run(timed()) >= 0.15


def test_run_script_sends_every_call_of_the_run_to_the_mock() -> None:
    openai = ModelProfile(provider="openai", name="gpt-4o-mini", api_key_env="NEVER_SET")
    config = ConfigSpec(models={"default": openai})
    with scripted("run-42", {"s": ["fix"]}) as script:
        model = ModelResolver(config, env={}, run_id="run-42").for_block(
            LlmBlock(block="b", kind="llm", prompt=PromptSpec(user="hi"))
        )
        assert ask(model, DECIDE) == {"route": "fix"}
        generated = ask(model, MANY, step="t")
    assert [call.step for call in script.calls] == ["s", "t"]
    first = script.calls[0]
    assert isinstance(first, StructuredRequest) and first.user == "Greet Ada."
    assert generated["summary"] == "b: name=Ada"
    # outside the run (or after it) the configured provider is used again
    with pytest.raises(ModelError, match="set the environment variable NEVER_SET"):
        ask(
            ModelResolver(config, env={}, run_id="run-42").for_block(
                LlmBlock(block="b", kind="llm", prompt=PromptSpec(user="hi"))
            ),
            DECIDE,
        )


def test_run_script_comes_before_profile_replies() -> None:
    config = ConfigSpec(
        models={"default": ModelProfile(provider="mock", replies={"s": ["review"]})}
    )
    script = MockScript().add("s", "fix")
    from engine.models import register_script, unregister_script

    register_script("run-7", script)
    try:
        model = ModelResolver(config, env={}, run_id="run-7").for_block(
            LlmBlock(block="b", kind="llm", prompt=PromptSpec(user="hi"))
        )
        assert ask(model, DECIDE) == {"route": "fix"}
    finally:
        unregister_script("run-7")
    assert ask(
        ModelResolver(config, env={}).for_block(
            LlmBlock(block="b", kind="llm", prompt=PromptSpec(user="hi"))
        ),
        DECIDE,
    ) == {"route": "review"}
