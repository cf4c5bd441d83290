"""Branching threads over the LangGraph API, with the real langgraph-sdk client: a run from one of the
thread's checkpoints (`checkpoint` / `checkpoint_id`) — an edited message, a regenerated answer, a new first
message — makes a branch; the model (a loopback OpenAI-compatible server, through the real langchain-openai
client) is sent exactly that branch's messages; the thread's state, its history (each turn's input and end,
the thread's start) and Blockyard's own messages route show what LangGraph's would (docs/langgraph-api.md,
"Branching threads")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from engine.serve.server import Settings
from tests.serve.serve_helpers import Live, start_live
from tests.support.usage_llm import UsageLLM

BLOCK = """
block: chat_reply
version: 1
description: Answer the next message.
kind: llm
history: 20
inputs:
  message: {type: string}
outputs:
  reply: {type: string}
prompt:
  system: Be brief.
  user: "{{ message }}"
"""

FLOW = """
flow: chat
version: 1
description: A conversation.
inputs:
  message: {type: string}
outputs: [reply]
steps:
  - id: answer
    uses: chat_reply
    with: {message: "{{ inputs.message }}"}
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, llm: UsageLLM) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("yard")
    files = {
        "blockyard.yaml": (
            f"models:\n  default: {{provider: openai, base_url: '{llm.base_url}', name: usage-model}}\n"
        ),
        "blocks/chat_reply.yaml": BLOCK,
        "flows/chat.yaml": FLOW,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.lstrip("\n"), encoding="utf-8")
    server = start_live(Settings(root=root, watch=False, schedules=False, grace=5.0, poll=0.1))
    yield server
    server.stop()


def lg(live: Live) -> Any:
    return get_sync_client(url=live.url + "/lg")


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text}]}


def turn(client: Any, thread: str, text: str | None, **where: Any) -> list[dict[str, Any]]:
    """One run on the thread; the thread's messages after it as (type, content)."""
    values = client.runs.wait(thread, "chat", input=said(text) if text else None, **where)
    assert "__error__" not in values, values
    messages: list[dict[str, Any]] = values["messages"]
    return messages


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


def sent(llm: UsageLLM) -> list[tuple[str, str]]:
    """What the last model call was sent, less its system prompt."""
    return [item for item in llm.calls[-1].messages if item[0] != "system"]


def first_seen(history: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
    """The oldest state holding the message, as useStream's getMessagesMetadata finds it."""
    found: dict[str, Any] = [
        h for h in history if message_id in [m["id"] for m in h["values"]["messages"]]
    ][-1]
    return found


def checkpoint(thread: str, checkpoint_id: str) -> dict[str, Any]:
    return {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}


def test_editing_the_first_message_starts_a_branch_from_the_threads_start(
    live: Live, llm: UsageLLM
) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    turn(client, thread, "My name is Ada")
    first = turn(client, thread, "I like tea")
    history = client.threads.get_history(thread)
    # the first human message first shows in the first turn's input, whose parent is the thread's start
    human = first[0]
    seen = first_seen(history, human["id"])
    assert seen["metadata"]["source"] == "input"
    parent = seen["parent_checkpoint"]
    assert parent["checkpoint_id"] == "__start__"

    edited = turn(client, thread, "My name is Bob", checkpoint=parent)
    assert sent(llm) == [("user", "My name is Bob")]  # nothing of the old branch
    reply = edited[-1]["content"]
    assert contents(edited) == ["My name is Bob", reply]
    after = turn(client, thread, "What is my name?")  # a plain turn goes on from the new branch
    assert sent(llm) == [
        ("user", "My name is Bob"),
        ("assistant", reply),
        ("user", "What is my name?"),
    ]
    assert contents(after)[:2] == ["My name is Bob", reply]
    assert contents(client.threads.get_state(thread)["values"]["messages"]) == contents(after)

    # the history holds both branches: two first turns beside each other under the start
    history = client.threads.get_history(thread, limit=100)
    children: dict[str | None, list[str]] = {}
    for state in history:
        parent_id = (state["parent_checkpoint"] or {}).get("checkpoint_id")
        children.setdefault(parent_id, []).append(state["checkpoint"]["checkpoint_id"])
    assert len(children["__start__"]) == 2
    assert len(history) == 4 * 2 + 1  # four turns (an input and an end each) and the start
    with live.client() as http:  # Blockyard's own route shows the branch the thread is on
        page = http.get(f"/threads/{thread}/history").json()
    assert [m["content"] for m in page["messages"]] == contents(after)


def test_regenerating_an_answer_says_its_message_again_from_where_it_was_said(
    live: Live, llm: UsageLLM
) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    turn(client, thread, "one")
    before = turn(client, thread, "two")
    answer = before[-1]
    history = client.threads.get_history(thread)
    seen = first_seen(history, answer["id"])
    parent = seen["parent_checkpoint"]  # the second turn's input
    assert parent["checkpoint_id"].endswith(":in")

    again = turn(client, thread, None, checkpoint=parent)
    assert sent(llm) == [("user", "one"), ("assistant", before[1]["content"]), ("user", "two")]
    assert contents(again)[:3] == contents(before)[:3]
    assert again[-1]["id"] != answer["id"]  # a new answer, on a branch beside the old one
    assert again[2]["id"] == before[2]["id"]  # the same human message, said again
    history = client.threads.get_history(thread, limit=100)
    # both answers follow the second turn's input, as in LangGraph; it has no input of its own
    ends = [
        h
        for h in history
        if (h["parent_checkpoint"] or {}).get("checkpoint_id") == parent["checkpoint_id"]
    ]
    assert len(ends) == 2 and {h["metadata"]["source"] for h in ends} == {"loop"}
    assert len(history) == 2 * 2 + 1 + 1  # two turns (input, end), the regenerated end, the start
    # the old branch's end is still readable by its checkpoint
    old = client.threads.get_state(thread, checkpoint_id=answer["id"].removesuffix("-ai"))
    assert contents(old["values"]["messages"]) == contents(before)

    # the checkpoint id alone (checkpoint_id) works too: regenerate the first answer
    again_first = turn(
        client, thread, None, checkpoint_id=before[0]["id"].removesuffix("-human") + ":in"
    )
    assert sent(llm) == [("user", "one")]
    assert contents(again_first)[0] == "one" and len(again_first) == 2


def test_a_run_from_a_checkpoint_is_refused_when_it_cannot_start_there(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    done = turn(client, thread, "one")
    run_id = done[-1]["id"].removesuffix("-ai")
    with pytest.raises(httpx.HTTPStatusError, match="404") as missing:
        client.runs.wait(thread, "chat", input=said("x"), checkpoint_id="no-such-turn")
    assert "no checkpoint 'no-such-turn'" in missing.value.response.text
    with pytest.raises(httpx.HTTPStatusError, match="422") as given:
        client.runs.wait(thread, "chat", input=said("x"), checkpoint_id=run_id + ":in")
    assert "takes no input" in given.value.response.text
    with pytest.raises(httpx.HTTPStatusError, match="422"):
        client.runs.wait(None, "chat", input=said("x"), checkpoint_id=run_id)
    with pytest.raises(httpx.HTTPStatusError, match="422"):
        client.runs.wait(thread, "chat", input=said("x"), checkpoint={"checkpoint_id": 5})
    # the latest turn's own end, as useStream sends it with every submit: a plain turn
    plain = turn(client, thread, "two", checkpoint=checkpoint(thread, run_id))
    assert contents(plain)[:2] == contents(done)
    assert len(client.threads.get_history(thread, limit=100)) == 5


def test_the_state_of_any_checkpoint_reads_back(live: Live, tmp_path: Path) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    done = turn(client, thread, "one")
    run_id = done[-1]["id"].removesuffix("-ai")
    start = client.threads.get_state(thread, checkpoint_id="__start__")
    assert start["values"] == {"messages": []} and start["parent_checkpoint"] is None
    asked = client.threads.get_state(thread, checkpoint_id=run_id + ":in")
    assert contents(asked["values"]["messages"]) == ["one"] and asked["next"] == ["chat"]
    assert asked["parent_checkpoint"]["checkpoint_id"] == "__start__"
    end = client.threads.get_state(thread, checkpoint_id=run_id)
    assert end["parent_checkpoint"]["checkpoint_id"] == run_id + ":in"
    empty = client.threads.create()["thread_id"]
    assert client.threads.get_history(empty) == []


def test_a_copied_thread_has_every_branch_and_goes_on_apart(live: Live, llm: UsageLLM) -> None:
    client = lg(live)
    thread = client.threads.create(metadata={"user": "ada"})["thread_id"]
    turn(client, thread, "one")
    turn(client, thread, "two")
    turn(client, thread, "deux", checkpoint_id=turn_of(client, thread, "one"))  # a branch
    with live.client() as http:
        copied = http.post(f"/lg/threads/{thread}/copy").json()
    copy = copied["thread_id"]
    assert copy != thread and copied["metadata"]["user"] == "ada"
    assert contents(copied["values"]["messages"])[::2] == ["one", "deux"]

    def shape(thread_id: str) -> list[tuple[str, list[str]]]:
        return [
            (h["metadata"]["source"], [m["content"] for m in h["values"]["messages"]])
            for h in client.threads.get_history(thread_id, limit=100)
        ]

    assert shape(copy) == shape(thread)  # the same checkpoints, branches and all
    # the copy goes on from its own conversation, and the original does not see it
    turn(client, copy, "trois")
    assert [text for role, text in sent(llm) if role == "user"] == ["one", "deux", "trois"]
    assert contents(client.threads.get_state(thread)["values"]["messages"])[-2] == "deux"
    assert len(client.threads.get_history(thread, limit=100)) + 2 == len(
        client.threads.get_history(copy, limit=100)
    )
    # a branch of the copy from its own first turn
    turn(client, copy, "zwei", checkpoint_id=turn_of(client, copy, "one"))
    assert sent(llm)[0] == ("user", "one") and sent(llm)[-1] == ("user", "zwei")
    with live.client() as http:
        assert http.post("/lg/threads/no-such-thread/copy").status_code == 404


def turn_of(client: Any, thread: str, said: str) -> str:
    """The run id of the thread's turn that said `said`, read from its history."""
    return next(
        str(h["metadata"]["run_id"])
        for h in client.threads.get_history(thread, limit=100)
        if h["metadata"]["source"] == "input" and h["values"]["messages"][-1]["content"] == said
    )


def test_writing_a_threads_messages_records_turns_the_next_run_goes_on_from(
    live: Live, llm: UsageLLM
) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    first = turn(client, thread, "one")
    written = client.threads.update_state(
        thread,
        {
            "messages": [
                {"type": "human", "content": "I like tea"},
                {"type": "ai", "content": "Noted: tea."},
            ]
        },
        as_node="answer",
    )
    run_id = written["checkpoint"]["checkpoint_id"]
    state = client.threads.get_state(thread)
    assert state["checkpoint"]["checkpoint_id"] == run_id
    assert contents(state["values"]["messages"]) == [*contents(first), "I like tea", "Noted: tea."]
    with live.client() as http:  # a recorded write: a finished run whose trace says who wrote it
        record = http.get(f"/runs/{run_id}").json()
        trace = http.get(f"/runs/{run_id}/events", headers={"Accept": "application/json"}).json()
    assert record["status"] == "finished" and record["outputs"] == {"reply": "Noted: tea."}
    assert [e["type"] for e in trace["events"]] == ["turn_written", "run_finished"]
    assert trace["events"][0]["data"]["by"] == "POST /threads/{id}/state"
    assert trace["events"][0]["data"]["as_node"] == "answer"
    turn(client, thread, "What do I like?")
    assert sent(llm)[2:] == [
        ("user", "I like tea"),
        ("assistant", "Noted: tea."),
        ("user", "What do I like?"),
    ]


def test_replacing_a_reply_writes_a_branch_and_keeps_the_old_one(live: Live, llm: UsageLLM) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    turn(client, thread, "one")
    before = turn(client, thread, "two")
    history_before = len(client.threads.get_history(thread, limit=100))
    client.threads.update_state(
        thread, {"messages": [{"id": before[1]["id"], "type": "ai", "content": "Corrected."}]}
    )
    now = contents(client.threads.get_state(thread)["values"]["messages"])
    assert now == ["one", "Corrected.", "two", before[3]["content"]]
    # two turns written (the corrected one and the one after it), each an input and an end
    assert len(client.threads.get_history(thread, limit=100)) == history_before + 4
    old = client.threads.get_state(thread, checkpoint_id=before[3]["id"].removesuffix("-ai"))
    assert contents(old["values"]["messages"]) == contents(before)  # the old branch stays
    turn(client, thread, "three")
    assert sent(llm)[:2] == [("user", "one"), ("assistant", "Corrected.")]


def test_a_thread_made_ahead_of_its_turns_is_seeded_by_a_write(live: Live, llm: UsageLLM) -> None:
    client = lg(live)
    thread = client.threads.create(graph_id="chat")["thread_id"]
    client.threads.update_state(
        thread,
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ]
        },
    )
    turn(client, thread, "again")
    assert sent(llm) == [("user", "hi"), ("assistant", "hello"), ("user", "again")]
    with live.client() as http:  # titled by the first message written to it
        assert http.get(f"/threads/{thread}").json()["title"] == "hi"


def test_a_write_that_is_not_turns_is_refused_and_changes_nothing(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    done = turn(client, thread, "one")
    refused = {
        "lone": {"messages": [{"type": "human", "content": "no reply"}]},
        "other key": {"messages": [{"type": "ai", "content": "x"}], "message": "y"},
        "kind": {"messages": [{"id": done[0]["id"], "type": "ai", "content": "x"}]},
        "system": {"messages": [{"type": "system", "content": "x"}]},
    }
    with live.client() as http:
        for why, values in refused.items():
            answer = http.post(f"/lg/threads/{thread}/state", json={"values": values})
            assert answer.status_code == 422, (why, answer.text)
        missing = http.post(
            f"/lg/threads/{thread}/state",
            json={"values": {"messages": []}, "checkpoint_id": "nope"},
        )
        assert missing.status_code in (404, 422)
        unknown = http.post("/lg/threads/no-such/state", json={"values": {"messages": []}})
        assert unknown.status_code == 404
    assert contents(client.threads.get_state(thread)["values"]["messages"]) == contents(done)
    assert len(client.threads.get_history(thread, limit=100)) == 3
