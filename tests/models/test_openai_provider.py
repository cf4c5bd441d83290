"""provider: openai through the real langchain-openai client, against the loopback stub."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from typing import Any, TypedDict

import pytest

from engine.models import ModelError, ModelOutputError, ModelResolver, is_transient
from engine.spec import ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import GREETING_SCHEMA, PLANTED_KEY, make_request
from tests.support.openai_stub import OpenAIStub, Reply

GOOD = {"greeting": "Hello, Ada!", "mood": "happy"}


def ask(model: Any, **request: Any) -> Any:
    return asyncio.run(model.structured(make_request(**request)))


def test_structured_output_by_function_calling(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.structured_output(GOOD))
    model = openai_model(temperature=0.2, max_tokens=64, headers={"X-Team": "blocks"})

    assert ask(model) == GOOD
    sent = stub.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {PLANTED_KEY}"
    assert sent.headers["x-team"] == "blocks"
    assert sent.body["model"] == "stub-model"
    assert sent.body["temperature"] == 0.2
    assert sent.body["tool_choice"] == "required"
    (tool,) = sent.body["tools"]
    assert tool["function"]["name"] == "greet"
    assert tool["function"]["parameters"] == GREETING_SCHEMA
    assert sent.messages == [
        {"role": "system", "content": "You greet people."},
        {"role": "user", "content": "Greet Ada."},
    ]


def test_output_failing_the_schema_is_repaired_by_one_retry(
    stub: OpenAIStub, openai_model: Any
) -> None:
    stub.queue(
        Reply.structured_output({"greeting": "Hi", "mood": "grumpy"}), Reply.structured_output(GOOD)
    )

    assert ask(openai_model()) == GOOD
    assert len(stub.requests) == 2
    retry = stub.requests[1].messages
    assert retry[2] == {
        "role": "assistant",
        "content": json.dumps({"greeting": "Hi", "mood": "grumpy"}),
    }
    assert retry[3]["role"] == "user"
    assert "at 'mood': 'grumpy' is not one of ['happy', 'calm']" in retry[3]["content"]


def test_garbage_twice_is_a_model_output_error(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(
        Reply.text("I'd rather chat about the weather."), Reply.tool_call("greet", "{not json")
    )

    with pytest.raises(
        ModelOutputError, match="does not match its outputs, even after a retry"
    ) as caught:
        ask(openai_model())
    message = str(caught.value)
    assert message.startswith(
        "flow 'hello', step 'greet': block 'greet' got output from openai model "
        "'stub-model' that does not match its outputs, even after a retry: "
    )
    assert "the reply is not JSON: '{not json'" in message
    assert not is_transient(caught.value, ["any"])
    assert len(stub.requests) == 2


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD) + "\n```",
        "Sure! Here it is: " + json.dumps(GOOD) + " Anything else?",
    ],
)
def test_servers_that_answer_in_text_still_work(
    stub: OpenAIStub, openai_model: Any, content: str
) -> None:
    stub.queue(Reply.text(content))
    assert ask(openai_model()) == GOOD


def test_no_user_prompt_sends_the_inputs(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.structured_output(GOOD))
    ask(openai_model(), user=None, inputs={"name": "Ada", "n": 2})
    assert stub.requests[0].messages[-1] == {
        "role": "user",
        "content": 'Inputs:\n{"name": "Ada", "n": 2}',
    }


def test_server_error_is_transient(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.error_reply(500, "upstream exploded"))
    with pytest.raises(ModelError, match=r"the server failed \(HTTP 500") as caught:
        ask(openai_model())
    assert str(caught.value) == (
        "flow 'hello', step 'greet': model profile 'default' (openai, model 'stub-model'): "
        "the server failed (HTTP 500: upstream exploded)"
    )
    assert caught.value.status == 500
    assert is_transient(caught.value, ["server_error"])
    assert not is_transient(caught.value, ["timeout", "rate_limit"])


def test_rate_limit_is_transient(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.error_reply(429, "slow down", kind="rate_limit_exceeded"))
    with pytest.raises(ModelError, match=r"rate limited \(HTTP 429") as caught:
        ask(openai_model())
    assert caught.value.kind == "rate_limit"
    assert is_transient(caught.value, ["rate_limit"])
    assert len(stub.requests) == 1  # max_retries=0: the client itself never retries


def test_timeout_is_transient(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.structured_output(GOOD, delay=5))
    with pytest.raises(ModelError, match=r"the request timed out after 0.2s") as caught:
        ask(openai_model(timeout="200ms"))
    assert str(caught.value).endswith(
        "(openai, model 'stub-model'): the request timed out after 0.2s"
    )
    assert is_transient(caught.value, ["timeout"])
    assert not is_transient(caught.value, ["server_error"])


def test_unreachable_server_is_a_connection_error() -> None:
    with OpenAIStub() as closed:
        url = closed.base_url
    resolver = ModelResolver(
        ConfigSpec(models={"local": ModelProfile(provider="openai", name="m", base_url=url)}),
        env={},
    )
    model = resolver.for_block(
        LlmBlock(block="greet", kind="llm", model="local", prompt=PromptSpec(user="hi"))
    )
    with pytest.raises(ModelError, match=r"cannot connect to http://127.0.0.1:") as caught:
        ask(model)
    assert f"cannot connect to {url}" in str(caught.value)
    assert is_transient(caught.value, ["connection"])


def test_401_is_a_clear_permanent_error(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.error_reply(401, "Incorrect API key provided.", kind="invalid_request_error"))
    with pytest.raises(
        ModelError, match="the server rejected the API key from \\$STUB_KEY"
    ) as caught:
        ask(openai_model())
    assert str(caught.value) == (
        "flow 'hello', step 'greet': model profile 'default' (openai, model 'stub-model'): the server rejected "
        "the API key from $STUB_KEY (HTTP 401: Incorrect API key provided.)"
    )
    assert not is_transient(caught.value, ["any"])


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (400, "the request was rejected"),
        (403, "permission denied for this model or key"),
        (404, "not found: check the model name and base_url"),
    ],
)
def test_client_errors_are_never_transient(
    stub: OpenAIStub, openai_model: Any, status: int, text: str
) -> None:
    stub.queue(Reply.error_reply(status, "nope"))
    with pytest.raises(ModelError, match=re.escape(f"{text} (HTTP {status}: nope)")) as caught:
        ask(openai_model())
    assert f"{text} (HTTP {status}: nope)" in str(caught.value)
    assert not is_transient(
        caught.value, ["any", "server_error", "rate_limit", "timeout", "connection"]
    )


def test_a_reply_that_is_not_a_chat_completion(stub: OpenAIStub, openai_model: Any) -> None:
    stub.queue(Reply.garbage(b"<html>login page</html>"))
    with pytest.raises(ModelError, match="the server's reply is not a chat completion") as caught:
        ask(openai_model())
    assert "the server's reply is not a chat completion (check base_url " + stub.base_url in str(
        caught.value
    )


def test_missing_key_names_the_variable(stub: OpenAIStub, openai_model: Any) -> None:
    with pytest.raises(
        ModelError, match="needs an API key: set the environment variable STUB_KEY"
    ) as caught:
        ask(openai_model(env={}))
    assert str(caught.value) == (
        "model profile 'default' (openai, model 'stub-model') needs an API key: "
        "set the environment variable STUB_KEY"
    )
    assert stub.requests == []


def test_local_server_needs_no_key_unless_one_is_named(stub: OpenAIStub) -> None:
    profile = ModelProfile(provider="openai", name="llama3", base_url=stub.base_url)
    model = ModelResolver(ConfigSpec(models={"default": profile}), env={}).for_block(
        LlmBlock(block="greet", kind="llm", prompt=PromptSpec(user="hi"))
    )
    stub.queue(Reply.structured_output(GOOD))
    assert ask(model) == GOOD
    assert stub.requests[0].headers["authorization"] == "Bearer not-needed"


def test_rotated_key_is_read_at_call_time(stub: OpenAIStub, openai_model: Any) -> None:
    env = {"STUB_KEY": "key-one"}
    model = openai_model(env=env)
    stub.queue(Reply.structured_output(GOOD), Reply.structured_output(GOOD))
    ask(model)
    env["STUB_KEY"] = "key-two"
    ask(model)
    assert [r.headers["authorization"] for r in stub.requests] == [
        "Bearer key-one",
        "Bearer key-two",
    ]


def test_retry_policy_around_a_graph_node_retries_to_success(
    stub: OpenAIStub, openai_model: Any
) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    class State(TypedDict, total=False):
        out: dict[str, Any]

    model = openai_model()

    async def call(state: State) -> State:
        return {"out": await model.structured(make_request())}

    graph = StateGraph(State)
    graph.add_node(
        "call",
        call,
        retry_policy=RetryPolicy(
            max_attempts=3,
            initial_interval=0.01,
            jitter=False,
            retry_on=lambda exc: is_transient(exc, ["server_error", "timeout"]),
        ),
    )
    graph.add_edge(START, "call")
    graph.add_edge("call", END)
    stub.queue(
        Reply.error_reply(503, "busy"),
        Reply.error_reply(500, "still busy"),
        Reply.structured_output(GOOD),
    )

    result = asyncio.run(graph.compile().ainvoke({}))
    assert result["out"] == GOOD
    assert len(stub.requests) == 3


def test_a_401_inside_a_graph_is_not_retried(stub: OpenAIStub, openai_model: Any) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    class State(TypedDict, total=False):
        out: dict[str, Any]

    model = openai_model()

    async def call(state: State) -> State:
        return {"out": await model.structured(make_request())}

    graph = StateGraph(State)
    graph.add_node(
        "call",
        call,
        retry_policy=RetryPolicy(
            max_attempts=3, initial_interval=0.01, retry_on=lambda exc: is_transient(exc, ["any"])
        ),
    )
    graph.add_edge(START, "call")
    graph.add_edge("call", END)
    stub.queue(Reply.error_reply(401, "bad key"), Reply.structured_output(GOOD))

    with pytest.raises(ModelError, match="the server rejected the API key"):
        asyncio.run(graph.compile().ainvoke({}))
    assert len(stub.requests) == 1


def test_streaming_inside_a_graph_yields_tokens_and_the_object(
    stub: OpenAIStub, openai_model: Any
) -> None:
    """With stream_mode="messages" LangChain streams the call (SSE); the tool call is reassembled."""
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        out: dict[str, Any]

    model = openai_model()

    async def call(state: State) -> State:
        return {"out": await model.structured(make_request())}

    graph = StateGraph(State)
    graph.add_node("call", call)
    graph.add_edge(START, "call")
    graph.add_edge("call", END)
    stub.queue(Reply.structured_output(GOOD))

    async def run() -> tuple[list[Any], list[Any]]:
        tokens: list[Any] = []
        values: list[Any] = []
        async for mode, data in graph.compile().astream({}, stream_mode=["messages", "values"]):
            (tokens if mode == "messages" else values).append(data)
        return tokens, values

    tokens, values = asyncio.run(run())
    assert stub.requests[0].body["stream"] is True
    assert len(tokens) > 3  # the stub sends the arguments in 7-character pieces
    assert values[-1]["out"] == GOOD


REPLY_SCHEMA = {
    "type": "object",
    "properties": {"reply": {"type": "string"}},
    "required": ["reply"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("content", ["Hello Ada, how can I help?", "42", '"quoted"'])
def test_plain_text_is_the_one_text_output(
    stub: OpenAIStub, openai_model: Any, content: str
) -> None:
    # chat models answer in text: a block with a single string output takes it as that output, at once
    stub.queue(Reply.text(content))
    assert ask(openai_model(), schema=REPLY_SCHEMA) == {"reply": content}
    assert len(stub.requests) == 1
    # JSON stays required for several outputs, or a single one that is not a string
    stub.queue(Reply.text("Hello Ada"), Reply.text("Hello again"))
    with pytest.raises(ModelOutputError, match="the reply is not JSON: 'Hello again'"):
        ask(openai_model())  # greeting + mood: JSON stays required
    number = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    stub.queue(Reply.text("seven"), Reply.text("eight"))
    with pytest.raises(ModelOutputError, match="does not match its outputs, even after a retry"):
        ask(openai_model(), schema=number)


def test_a_threads_history_goes_between_system_and_prompt(
    stub: OpenAIStub, openai_model: Any
) -> None:
    stub.queue(Reply.structured_output(GOOD))
    request = dataclasses.replace(
        make_request(), history=(("user", "My name is Ada"), ("assistant", "Hi Ada!"))
    )
    asyncio.run(openai_model().structured(request))
    assert stub.requests[0].messages == [
        {"role": "system", "content": "You greet people."},
        {"role": "user", "content": "My name is Ada"},
        {"role": "assistant", "content": "Hi Ada!"},
        {"role": "user", "content": "Greet Ada."},
    ]
