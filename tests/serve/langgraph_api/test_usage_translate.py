"""`usage_metadata` of the AI messages the LangGraph API builds, from model_call events written here: the
stream's per-step messages and usage chunks, the reply in the values, a thread's rows (docs/langgraph-api.md).
The same through a real server and the real SDK: test_usage_sdk.py."""

from __future__ import annotations

from typing import Any

from engine.core.events import RunStatus
from engine.core.usage import Spend
from engine.serve.langgraph_api import messages as lc
from engine.serve.langgraph_api.stream import Translator
from engine.state.messages import Message
from engine.state.store import RunRecord


def model_call(
    seq: int,
    step: str | None,
    tokens: tuple[int, int, int | None, int | None],
    cost: float | None = 0.001,
) -> dict[str, Any]:
    return {
        "type": "model_call",
        "run_id": "r1",
        "seq": seq,
        "step": step,
        "time": "2026-05-01T12:00:00.000Z",
        "data": {
            "provider": "mock",
            "model": "m",
            "purpose": "block",
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "cached_tokens": tokens[2],
            "reasoning_tokens": tokens[3],
            "latency_ms": 5.0,
            "cost_usd": cost,
            "ok": True,
        },
    }


def event(seq: int, kind: str, step: str | None = None, **data: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "run_id": "r1",
        "seq": seq,
        "step": step,
        "time": "2026-05-01T12:00:00.000Z",
        "data": data,
    }


RUN = [
    event(1, "run_started"),
    event(2, "step_started", "answer"),
    event(3, "token", "answer", text="Hello "),
    event(4, "token", "answer", text="there"),
    model_call(5, "answer", (10, 2, 4, None)),
    model_call(6, "answer", (20, 3, None, 1), cost=None),  # an agent's second turn: no price known
    event(7, "step_finished", "answer", outputs={"reply": "Hello there"}),
    event(8, "step_started", "name"),
    # a step that streamed nothing: no message of its own
    model_call(9, "name", (7, 5, None, None)),
    event(10, "step_finished", "name", outputs={}),
    model_call(11, None, (1, 1, None, None)),  # naming the thread: a call of no step
    event(12, "run_finished", outputs={"reply": "Hello there"}),
]
ANSWER = {
    "input_tokens": 30,
    "output_tokens": 5,
    "total_tokens": 35,
    "input_token_details": {"cache_read": 4},
    "output_token_details": {"reasoning": 1},
}
WHOLE = {
    "input_tokens": 38,
    "output_tokens": 11,
    "total_tokens": 49,
    "input_token_details": {"cache_read": 4},
    "output_token_details": {"reasoning": 1},
}


def parts(modes: set[str], translator: Translator | None = None) -> list[tuple[str, Any]]:
    translator = translator or Translator(
        frozenset(modes), "r1", "t1", "chat", {"message": "hi"}, []
    )
    return [part for one in RUN for part in translator.parts(one)]


def test_messages_tuple_ends_a_streamed_step_with_its_usage() -> None:
    chunks = [data for name, data in parts({"messages-tuple"}) if name == "messages"]
    assert "".join(chunk["content"] for chunk, _ in chunks) == "Hello there"
    assert [chunk["usage_metadata"] for chunk, _ in chunks] == [None, None, ANSWER]
    assert {chunk["id"] for chunk, _ in chunks} == {"r1-ai-answer"}
    assert chunks[-1][1]["langgraph_node"] == "answer"


def test_messages_complete_carries_the_steps_usage_and_the_reply_the_runs() -> None:
    found = parts({"messages", "values"})
    complete = [data[0] for name, data in found if name == "messages/complete"]
    assert [(m["content"], m["usage_metadata"]) for m in complete] == [("Hello there", ANSWER)]
    assert all(
        data[0]["usage_metadata"] is None for name, data in found if name == "messages/partial"
    )
    first, last = [data for name, data in found if name == "values"]
    assert [m["type"] for m in first["messages"]] == ["human"]  # no reply yet
    reply = last["messages"][-1]
    assert reply["type"] == "ai" and reply["id"] == "r1-ai" and reply["usage_metadata"] == WHOLE


def test_the_model_calls_before_a_followed_stream_count_in_the_reply() -> None:
    translator = Translator(frozenset({"values"}), "r1", "t1", "chat", {"message": "hi"}, [])
    # earlier events
    translator.spent = Spend(model_calls=2, input_tokens=100, output_tokens=50, cached_tokens=1)
    last = [data for name, data in parts({"values"}, translator) if name == "values"][-1]
    assert last["messages"][-1]["usage_metadata"] == {
        "input_tokens": 138,
        "output_tokens": 61,
        "total_tokens": 199,
        "input_token_details": {"cache_read": 5},
        "output_token_details": {"reasoning": 1},
    }
    # the run's record, when given, is the reply's usage (POST /runs/wait: no events seen)
    fresh = Translator(frozenset({"values"}), "r1", None, "chat", {"message": "hi"}, [])
    shown = fresh.values({"reply": "x"}, Spend(model_calls=1, input_tokens=3, output_tokens=4))
    assert shown["messages"][-1]["usage_metadata"]["total_tokens"] == 7


def test_no_model_call_no_usage_metadata() -> None:
    assert lc.usage_metadata(None) is None and lc.usage_metadata(Spend()) is None
    row = Message(
        thread_id="t1",
        index=1,
        role="assistant",
        content="hi",
        run_id="old",
        created="2026-05-01T12:00:00.000Z",
    )
    # a turn recorded before runs kept their totals reads 0 model calls: served without usage
    old = RunRecord(
        id="old", flow="chat", version=1, digest="d", status=RunStatus.FINISHED, inputs={}
    )
    assert lc.from_row(row, lc.spend_of(old))["usage_metadata"] is None
    counted = RunRecord(
        id="new",
        flow="chat",
        version=1,
        digest="d",
        status=RunStatus.FINISHED,
        inputs={},
        model_calls=2,
        input_tokens=9,
        output_tokens=1,
        cost_usd=0.5,
    )
    assert lc.from_row(row, lc.spend_of(counted))["usage_metadata"] == {
        "input_tokens": 9,
        "output_tokens": 1,
        "total_tokens": 10,
        "input_token_details": {"cache_read": 0},
        "output_token_details": {"reasoning": 0},
    }
    assert lc.spend_of({"model_calls": 1, "input_tokens": 2}).input_tokens == 2
