"""`usage_metadata` on the AI messages of the LangGraph API, read with the real langgraph-sdk client from a real
server whose flows run on the engine's `mock` model (deterministic token counts): it equals the sums of the
runs' `model_call` events (docs/langgraph-api.md, docs/observability.md "LangGraph clients")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import Command

from engine.core.usage import Spend
from engine.serve.langgraph_api.messages import usage_metadata
from engine.serve.server import Settings
from tests.serve.langgraph_api.conftest import EXTRA, example_yard
from tests.serve.serve_helpers import Live, start_live

# a conversation that drafts a reply, asks a person, then rewrites it: model calls before and after a gate
CHECKED = """
flow: checked_chat
version: 1
description: Draft a reply, ask a person, then polish it.
inputs:
  message: {type: string}
outputs: [reply]
steps:
  - id: draft
    uses: support_reply
    with: {message: "{{ inputs.message }}"}
  - id: ask
    approval:
      message: "Send it?"
  - id: polish
    uses: support_reply
    with: {message: "{{ context.reply }}"}
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = example_yard(
        tmp_path_factory.mktemp("yard"), {**EXTRA, "flows/checked_chat.yaml": CHECKED}
    )
    server = start_live(Settings(root=root, watch=False, schedules=False, grace=5.0, poll=0.1))
    yield server
    server.stop()


def lg(live: Live) -> Any:
    return get_sync_client(url=live.url + "/lg")


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text}]}


def trace(live: Live, run_id: str) -> list[dict[str, Any]]:
    with live.client() as http:
        found: list[dict[str, Any]] = http.get(
            f"/runs/{run_id}/events", headers={"Accept": "application/json"}
        ).json()["events"]
    return found


def spent(live: Live, run_id: str, step: str | None = None) -> Spend:
    """The sums of the run's model_call events (of one step)."""
    total = Spend()
    for event in trace(live, run_id):
        if event["type"] == "model_call" and (step is None or event["step"] == step):
            total.add(event["data"])
    return total


def run_of(message: dict[str, Any]) -> str:
    return str(message["id"]).removesuffix("-ai")


def test_each_reply_of_a_thread_carries_its_turns_model_calls(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    answers = [
        client.runs.wait(thread, "support_chat", input=said(text))["messages"][-1]
        for text in ("My name is Ada", "What is my name?")
    ]
    state = client.threads.get_state(thread)["values"]["messages"]
    replies = [m for m in state if m["type"] == "ai"]
    assert [m["id"] for m in replies] == [m["id"] for m in answers]
    for reply, answered in zip(replies, answers, strict=True):
        used = spent(live, run_of(reply))
        assert used.model_calls >= 1 and used.input_tokens > 0 and used.output_tokens > 0
        assert reply["usage_metadata"] == usage_metadata(used) == answered["usage_metadata"]
        total = reply["usage_metadata"]
        assert total["total_tokens"] == total["input_tokens"] + total["output_tokens"]
        with live.client() as http:  # the run's record holds the same totals
            record = http.get(f"/runs/{run_of(reply)}").json()
        assert usage_metadata(Spend.of(record)) == total
    assert all(m.get("usage_metadata") is None for m in state if m["type"] == "human")
    history = client.threads.get_history(thread)
    assert history[0]["values"]["messages"][-1]["usage_metadata"] == replies[-1]["usage_metadata"]
    # history[1] is the second turn's input: the first turn's reply ends history[2]
    assert history[2]["values"]["messages"][-1]["usage_metadata"] == replies[0]["usage_metadata"]
    assert (
        client.threads.get(thread)["values"]["messages"][-1]["usage_metadata"]
        == replies[-1]["usage_metadata"]
    )


def test_a_stream_carries_the_usage_of_each_step_and_of_the_reply(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread,
            "support_chat",
            input=said("My order 123 is late"),
            stream_mode=["values", "messages-tuple"],
        )
    )
    run_id = parts[0].data["run_id"]
    chunks = [p.data[0] for p in parts if p.event == "messages"]
    used = [chunk["usage_metadata"] for chunk in chunks if chunk["usage_metadata"] is not None]
    assert used == [usage_metadata(spent(live, run_id, "answer"))]  # the step's last chunk
    assert chunks[-1]["content"] == "" and chunks[-1]["id"] == chunks[0]["id"]
    reply = [p.data for p in parts if p.event == "values"][-1]["messages"][-1]
    assert reply["usage_metadata"] == usage_metadata(spent(live, run_id)) is not None
    # `messages` mode: the step's complete message with its usage
    again = list(
        client.runs.stream(thread, "support_chat", input=said("thanks"), stream_mode="messages")
    )
    again_id = again[0].data["run_id"]
    [complete] = [p.data[0] for p in again if p.event == "messages/complete"]
    assert complete["usage_metadata"] == usage_metadata(spent(live, again_id, "answer")) is not None
    # joining the finished run replays it with the same usage
    joined = list(client.runs.join_stream(thread, run_id, stream_mode="values"))
    assert joined[-1].data["messages"][-1]["usage_metadata"] == reply["usage_metadata"]
    [joined_reply] = [
        m for m in client.runs.join(thread, run_id)["messages"] if m["id"] == reply["id"]
    ]
    assert joined_reply["usage_metadata"] == reply["usage_metadata"]


def test_a_reply_resumed_after_a_gate_counts_both_executions(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    waiting = client.runs.wait(thread, "checked_chat", input=said("Where is my parcel?"))
    assert waiting["__interrupt__"]
    parts = list(
        client.runs.stream(
            thread, "checked_chat", command=Command(resume=True), stream_mode="values"
        )
    )
    run_id = parts[0].data["run_id"]
    before, after = spent(live, run_id, "draft"), spent(live, run_id, "polish")
    assert before.model_calls >= 1 and after.model_calls >= 1  # a call on each side of the gate
    whole = usage_metadata(spent(live, run_id))
    assert parts[-1].data["messages"][-1]["usage_metadata"] == whole
    assert client.threads.get_state(thread)["values"]["messages"][-1]["usage_metadata"] == whole
    # a stream that reconnects after the gate's decision still counts the calls before it
    ids = [p.id for p in parts[1:]]
    rest = list(client.runs.join_stream(thread, run_id, last_event_id=ids[0], stream_mode="values"))
    assert rest[-1].data["messages"][-1]["usage_metadata"] == whole


def test_a_run_without_a_thread_answers_its_usage(live: Live) -> None:
    client = lg(live)
    values = client.runs.wait(None, "support_chat", input={"message": "hello"})
    reply = values["messages"][-1]
    assert reply["type"] == "ai" and reply["usage_metadata"] == usage_metadata(
        spent(live, run_of(reply))
    )
    assert reply["usage_metadata"] is not None
    # a flow that calls no model: its reply has no usage
    assert client.runs.wait(None, "count", input={}) == {"n": 42}
