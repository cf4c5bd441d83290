"""Token streaming from a real OpenAI-compatible server (the loopback stub streams SSE chunks):
llm, decide and agent replies reach `token` events as they arrive, also from inside a tool call."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from engine.cli import main
from engine.core.events import EventDict
from engine.models import ModelResolver, TurnRequest
from engine.models.agentic import function_tool
from engine.models.streaming import FieldText, text_field
from engine.runtime.yard import Yard
from engine.spec import AgentBlock, ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import make_request
from tests.support.openai_stub import OpenAIStub, Reply

ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
TWO = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "score": {"type": "number"}},
    "required": ["answer", "score"],
    "additionalProperties": False,
}
TEXT = 'Ada Lovelace wrote "the first program" \\ in 1843.\nÉcrit à Londres 😀.'


def model_on(stub: OpenAIStub) -> ModelResolver:
    profile = ModelProfile(provider="openai", name="stub-model", base_url=stub.base_url)
    return ModelResolver(ConfigSpec(models={"default": profile}), env={})


def structured(stub: OpenAIStub, schema: dict[str, Any]) -> tuple[Any, list[str]]:
    tokens: list[str] = []
    request = make_request(schema, step="s", block="answer")
    request = type(request)(**{**request.__dict__, "on_token": tokens.append})
    value = asyncio.run(
        model_on(stub)
        .for_block(LlmBlock(block="answer", kind="llm", prompt=PromptSpec(user="hi")))
        .structured(request)
    )
    return value, tokens


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_the_text_field_is_decoded_from_json_arriving_in_pieces(size: int) -> None:
    document = json.dumps({"meta": {"answer": "not this"}, "answer": TEXT, "z": [1, "}"]})
    decoder = FieldText("answer")
    assert (
        "".join(decoder.feed(document[i : i + size]) for i in range(0, len(document), size)) == TEXT
    )


def test_the_streamed_field_is_the_only_text_output() -> None:
    assert text_field(ANSWER) == "answer"
    assert text_field(TWO) is None
    assert text_field({"properties": {"n": {"type": "integer"}}}) is None


def test_an_llm_reply_inside_a_tool_call_is_streamed_as_decoded_text(stub: OpenAIStub) -> None:
    stub.queue(Reply.structured_output({"answer": TEXT}))
    value, tokens = structured(stub, ANSWER)
    assert value == {"answer": TEXT}
    assert stub.requests[0].body["stream"] is True
    assert len(tokens) > 3 and "".join(tokens) == TEXT  # piece by piece, escapes decoded


def test_a_json_answer_in_the_content_streams_its_text_field(stub: OpenAIStub) -> None:
    stub.queue(Reply.json_content({"answer": "Hello there, Ada."}))
    value, tokens = structured(stub, ANSWER)
    assert value == {"answer": "Hello there, Ada."} and "".join(tokens) == "Hello there, Ada."


def test_several_outputs_stream_no_json(stub: OpenAIStub) -> None:
    stub.queue(Reply.structured_output({"answer": "x", "score": 1}))
    value, tokens = structured(stub, TWO)
    assert value == {"answer": "x", "score": 1} and tokens == []


def test_an_agent_final_answer_call_is_streamed(stub: OpenAIStub) -> None:
    stub.queue(Reply.tool_call("final_answer", {"answer": TEXT}))
    tokens: list[str] = []
    request = TurnRequest(
        flow="f",
        step="s",
        block="answer",
        messages=(HumanMessage("hi"),),
        tools=(function_tool("final_answer", "answer", ANSWER),),
        answer_tool="final_answer",
        answer_schema=ANSWER,
    )
    agent = model_on(stub).agent_for_block(
        AgentBlock(block="answer", kind="agent", prompt=PromptSpec(user="hi"))
    )
    said = asyncio.run(agent.turn(request, tokens.append))
    assert said.tool_calls[0]["args"] == {"answer": TEXT}
    assert "".join(tokens) == TEXT


YARD = {
    "blockyard.yaml": "models:\n  default: {provider: openai, name: stub-model, base_url: BASE}\n",
    "blocks/answer.yaml": """
        block: answer
        kind: llm
        inputs: {question: {type: string}}
        outputs: {answer: {type: string}}
        prompt: {user: "{{ question }}"}
    """,
    "flows/ask.yaml": """
        flow: ask
        inputs: {question: {type: string}}
        outputs: [answer]
        steps:
          - {id: reply, uses: answer}
    """,
}


def make(root: Path, stub: OpenAIStub) -> Path:
    for name, text in YARD.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            textwrap.dedent(text).lstrip("\n").replace("BASE", stub.base_url), encoding="utf-8"
        )
    return root


def test_a_run_emits_tokens_while_the_server_is_still_sending(
    tmp_path: Path, stub: OpenAIStub
) -> None:
    text = "One two three four five six seven eight nine ten."
    stub.queue(Reply(structured={"answer": text}, chunk_delay=0.02))
    root = make(tmp_path / "yard", stub)

    async def watch() -> list[tuple[float, EventDict]]:
        seen: list[tuple[float, EventDict]] = []
        with Yard.load(root) as yard:
            async for event in yard.astream("ask", {"question": "Count."}):
                seen.append((time.monotonic(), event.as_dict()))
        return seen

    seen = asyncio.run(watch())
    tokens = [(at, e) for at, e in seen if e["type"] == "token"]
    finished = next(at for at, e in seen if e["type"] == "step_finished")
    assert "".join(e["data"]["text"] for _, e in tokens) == text
    assert all(e["step"] == "reply" and e["data"]["block"] == "answer" for _, e in tokens)
    # the first token came while ~10 more chunks (20 ms apart) were still on their way
    assert finished - tokens[0][0] > 0.1
    with Yard.load(root) as yard:
        stored = yard.events(next(e["run_id"] for _, e in seen))
    assert "token" not in {e.type for e in stored}  # streamed live, not kept in the trace


def test_run_json_prints_the_tokens(
    tmp_path: Path, stub: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.queue(Reply.structured_output({"answer": "Streamed on the command line."}))
    root = make(tmp_path / "yard", stub)
    code = main(["run", "ask", "--input", "question=Hi", "--json", "--root", str(root)])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert code == 0
    assert (
        "".join(e["data"]["text"] for e in events if e["type"] == "token")
        == "Streamed on the command line."
    )
    kinds = [e["type"] for e in events]
    assert kinds.index("step_started") < kinds.index("token") < kinds.index("step_finished")
