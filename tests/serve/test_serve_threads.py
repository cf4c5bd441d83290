"""Conversation threads over HTTP (engine/serve/routes/threads.py) on a real server and a real state
database: create, list, read, take turns in the three answer modes, page the history, delete."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.serve_helpers import ADDER, GATED_FLOW, PAUSE, YARD, Live, read_sse, wait_run
from tests.support.example import copy_example_yard
from tests.support.state import checkpoint_tables, state_db

REPO = Path(__file__).resolve().parents[2]

ECHO = """
block: echo
version: 1
description: Answer with what was said.
kind: transform
inputs: {message: {type: string}}
outputs: {reply: {type: string}}
compute: {reply: "'you said: ' ~ message"}
"""

CHAT = """
flow: chat
version: 1
description: Echo the message.
inputs: {message: {type: string}}
outputs: [reply]
steps:
  - {id: answer, uses: echo, with: {message: "{{ inputs.message }}"}}
"""

SLOW_CHAT = """
flow: slow_chat
version: 1
description: Nap, then echo.
inputs: {message: {type: string}}
outputs: [reply]
steps:
  - {id: nap, uses: pause}
  - {id: answer, uses: echo, with: {message: "{{ inputs.message }}"}}
"""

CHAT_YARD = {
    **YARD,
    "blocks/echo.yaml": ECHO,
    "flows/chat.yaml": CHAT,
    "flows/slow_chat.yaml": SLOW_CHAT,
    "flows/gated.yaml": GATED_FLOW,
    "blocks/adder.yaml": ADDER,
    "blocks/pause.yaml": PAUSE,
}


@pytest.fixture
def chat_yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(CHAT_YARD)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the repository's example yard (support_chat on its scripted mock model)."""
    return copy_example_yard(tmp_path / "example")


def turn(client: httpx.Client, thread: str, message: str, **extra: Any) -> dict[str, Any]:
    response = client.post(
        f"/threads/{thread}/runs", json={"inputs": {"message": message}, **extra}
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def error_of(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


# ---- the support_chat example --------------------------------------------------------------------


def test_support_chat_remembers_the_name_over_http(
    example: Path, serve: Callable[..., Live], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    live = serve(example, watch=False, schedules=False)
    with live.client() as client:
        assert (
            client.post("/threads", json={"id": "ada", "flow": "support_chat"}).status_code == 201
        )
        first = turn(client, "ada", "My name is Ada")
        assert (first["status"], first["thread_id"]) == ("finished", "ada")
        assert first["reply"] == "Thanks for writing to ACME support. How can I help you today?"
        turn(client, "ada", "My order 123 is late")
        with client.stream(
            "POST",
            "/threads/ada/runs",
            json={"inputs": {"message": "What is my name?"}},
            headers={"Accept": "text/event-stream"},
        ) as response:
            streamed = read_sse(response)
        third = streamed[-1]["data"]
        assert (streamed[0]["event"], streamed[-1]["event"]) == ("thread_id", "complete")
        # the rule answers only when "Ada" is in what the model was sent: the history of turn 1
        assert third["reply"] == "Your name is Ada."
        tokens = [m["data"]["data"]["text"] for m in streamed if m["event"] == "token"]
        # the reply, as it arrived
        assert len(tokens) > 1 and "".join(tokens) == "Your name is Ada."
        assert third["outputs"] == {"reply": "Your name is Ada."}
        assert (
            third["message"]["index"] == 5
            and third["message"]["links"]["run"] == f"/runs/{third['run_id']}"
        )
        # the same question in a thread without that history gets the other answer
        assert (
            client.post("/threads", json={"id": "stranger", "flow": "support_chat"}).status_code
            == 201
        )
        assert (
            turn(client, "stranger", "What is my name?")["reply"]
            == "I'm sorry, I don't know your name yet."
        )
        history = client.get("/threads/ada/history").json()
        assert [(m["role"], m["content"]) for m in history["messages"]][-2:] == [
            ("user", "What is my name?"),
            ("assistant", "Your name is Ada."),
        ]
        thread = client.get("/threads/ada").json()
        assert (thread["flow"], thread["turns"], thread["name"]) == (
            "support_chat",
            3,
            "My name is Ada",
        )


# ---- creating, reading, listing ------------------------------------------------------------------


def test_create_read_and_list_threads(chat_yard: Path, serve: Callable[..., Live]) -> None:
    live = serve(chat_yard, watch=False, schedules=False)
    with live.client() as client:
        made = client.post("/threads", json={"id": "t1", "flow": "chat"})
        assert made.status_code == 201 and made.headers["location"] == "/threads/t1"
        body = made.json()
        assert (body["id"], body["flow"], body["turns"], body["name"], body["last_run"]) == (
            "t1",
            "chat",
            0,
            None,
            None,
        )
        assert body["links"] == {
            "thread": "/threads/t1",
            "history": "/threads/t1/history",
            "runs": "/threads/t1/runs",
        }
        assert error_of(client.post("/threads", json={"id": "t1"})) == (409, "thread_exists")
        assert error_of(client.post("/threads", json={"id": "no spaces"})) == (
            422,
            "invalid_request",
        )
        assert error_of(client.post("/threads", json={"flow": "caht"})) == (404, "unknown_flow")
        assert error_of(client.post("/threads", json={"id": "t9", "colour": "red"})) == (
            422,
            "invalid_request",
        )
        generated = client.post("/threads")  # no body: a generated id, no flow yet
        assert generated.status_code == 201 and generated.json()["flow"] is None
        assert error_of(client.get("/threads/nope")) == (404, "unknown_thread")
        assert (
            client.get("/threads/t11").json()["error"]["message"]
            == "unknown thread 't11' (did you mean 't1'?)"
        )
        turn(client, "t1", "hello there")
        listed = client.get("/threads").json()["threads"]
        assert [t["id"] for t in listed] == [
            "t1",
            generated.json()["id"],
        ]  # the most recently active first
        first = listed[0]
        assert (first["flow"], first["turns"], first["name"], first["last_status"]) == (
            "chat",
            1,
            "hello there",
            "finished",
        )
        assert first["updated"] >= first["created"]
        assert [t["id"] for t in client.get("/threads?flow=chat").json()["threads"]] == ["t1"]
        assert len(client.get("/threads?limit=1").json()["threads"]) == 1
        assert error_of(client.get("/threads?limit=0")) == (422, "invalid_request")


def test_a_thread_without_a_flow_takes_it_from_its_first_turn(
    chat_yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(chat_yard, watch=False, schedules=False)
    with live.client() as client:
        assert client.post("/threads", json={"id": "open"}).status_code == 201
        missing = client.post("/threads/open/runs", json={"inputs": {"message": "hi"}})
        assert (
            error_of(missing) == (422, "invalid_request")
            and "flow" in missing.json()["error"]["message"]
        )
        assert turn(client, "open", "hi", flow="chat")["reply"] == "you said: hi"
        assert client.get("/threads/open").json()["flow"] == "chat"
        wrong = client.post("/threads/open/runs", json={"inputs": {"message": "hi"}, "flow": "add"})
        assert error_of(wrong) == (409, "wrong_flow")
        assert error_of(
            client.post("/threads/nope/runs", json={"inputs": {"message": "hi"}, "flow": "chat"})
        ) == (404, "unknown_thread")
        # input limits and checks are the runs' own
        assert error_of(client.post("/threads/open/runs", json={"inputs": {}})) == (
            422,
            "invalid_request",
        )
        assert error_of(
            client.post(
                "/threads/open/runs", content=b"{", headers={"Content-Type": "application/json"}
            )
        ) == (400, "malformed_json")


# ---- a turn's three answers ----------------------------------------------------------------------


def test_a_turn_streams_thread_id_then_its_events_then_complete(
    chat_yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(chat_yard, watch=False, schedules=False)
    with live.client() as client:
        client.post("/threads", json={"id": "s", "flow": "chat"})
        headers = {"Accept": "text/event-stream"}
        with client.stream(
            "POST", "/threads/s/runs", json={"inputs": {"message": "one two"}}, headers=headers
        ) as response:
            assert response.status_code == 200
            first = read_sse(response)
        kinds = [m["event"] for m in first]
        assert kinds[0] == "thread_id" and kinds[-1] == "complete"
        run_id = first[0]["data"]["run_id"]
        assert first[0]["data"] == {"thread_id": "s", "run_id": run_id, "flow": "chat"}
        # not run events: no seq to resume from
        assert "id" not in first[0] and "id" not in first[-1]
        assert kinds.index("thread_name") < kinds.index("run_finished") < kinds.index("complete")
        assert next(m for m in first if m["event"] == "thread_name")["data"]["data"] == {
            "thread_id": "s",
            "name": "one two",
        }
        done = first[-1]["data"]
        assert (done["status"], done["reply"], done["run_id"], done["thread_id"]) == (
            "finished",
            "you said: one two",
            run_id,
            "s",
        )
        assert done["message"]["role"] == "assistant" and done["message"]["index"] == 1
        with client.stream(
            "POST", "/threads/s/runs", json={"inputs": {"message": "three"}}, headers=headers
        ) as response:
            second = [m["event"] for m in read_sse(response)]
        assert second[0] == "thread_id" and second[-1] == "complete" and "thread_name" not in second


def test_a_turn_in_the_background_answers_202(chat_yard: Path, serve: Callable[..., Live]) -> None:
    live = serve(chat_yard, watch=False, schedules=False)
    with live.client() as client:
        client.post("/threads", json={"id": "bg", "flow": "chat"})
        accepted = client.post(
            "/threads/bg/runs?wait=false",
            json={"inputs": {"message": "later"}, "run_id": "bg-turn-1"},
        )
        assert accepted.status_code == 202
        body = accepted.json()
        assert (body["run_id"], body["thread_id"], body["flow"]) == ("bg-turn-1", "bg", "chat")
        assert (
            body["links"]["run"] == "/runs/bg-turn-1"
            and body["links"]["history"] == "/threads/bg/history"
        )
        run = wait_run(client, "bg-turn-1")
        assert (run["status"], run["thread_id"]) == ("finished", "bg")
        said = client.get("/threads/bg/history").json()["messages"]
        assert [(m["role"], m["content"], m["run_id"]) for m in said] == [
            ("user", "later", "bg-turn-1"),
            ("assistant", "you said: later", "bg-turn-1"),
        ]


# ---- history -------------------------------------------------------------------------------------


def test_history_is_paged_oldest_first(chat_yard: Path, serve: Callable[..., Live]) -> None:
    live = serve(chat_yard, watch=False, schedules=False)
    with live.client() as client:
        client.post("/threads", json={"id": "h", "flow": "chat"})
        for word in ("a", "b", "c"):
            turn(client, "h", word)
        whole = client.get("/threads/h/history").json()
        assert whole["total"] == 6 and [m["index"] for m in whole["messages"]] == list(range(6))
        assert whole["links"] == {"next": None, "prev": None}
        message = whole["messages"][1]
        assert set(message) == {"index", "role", "content", "run_id", "created", "links"}
        assert message["links"] == {
            "run": f"/runs/{message['run_id']}",
            "events": f"/runs/{message['run_id']}/events",
        }
        assert client.get(message["links"]["run"]).json()["outputs"] == {"reply": "you said: a"}
        page = client.get("/threads/h/history?limit=2").json()
        assert [m["content"] for m in page["messages"]] == ["a", "you said: a"]
        assert page["links"] == {"next": "/threads/h/history?after=1&limit=2", "prev": None}
        page = client.get(page["links"]["next"]).json()
        assert [m["index"] for m in page["messages"]] == [2, 3]
        assert page["links"]["prev"] == "/threads/h/history?before=2&limit=2"
        back = client.get(page["links"]["prev"]).json()
        assert [m["index"] for m in back["messages"]] == [0, 1]
        last = client.get("/threads/h/history?newest=true&limit=2").json()
        assert [m["content"] for m in last["messages"]] == [
            "c",
            "you said: c",
        ]  # still oldest first
        assert last["links"] == {"next": None, "prev": "/threads/h/history?before=4&limit=2"}
        assert error_of(client.get("/threads/h/history?after=1&before=3")) == (
            422,
            "invalid_request",
        )
        assert error_of(client.get("/threads/h/history?limit=5000")) == (422, "invalid_request")
        assert error_of(client.get("/threads/nope/history")) == (404, "unknown_thread")


# ---- deleting ------------------------------------------------------------------------------------


def test_delete_frees_the_id_and_forgets_the_conversation(
    example: Path, serve: Callable[..., Live], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    live = serve(example, watch=False, schedules=False)
    with live.client() as client:
        client.post("/threads", json={"id": "gone", "flow": "support_chat"})
        turn(client, "gone", "My name is Ada")
        old_run = client.get("/threads/gone").json()["last_run"]
        deleted = client.delete("/threads/gone")
        assert deleted.status_code == 204 and deleted.content == b""
        assert error_of(client.get("/threads/gone")) == (404, "unknown_thread")
        assert error_of(client.delete("/threads/gone")) == (404, "unknown_thread")
        with state_db(example) as db:
            for table in ("messages", *checkpoint_tables(example)):
                assert db.execute(
                    f"SELECT COUNT(*) FROM {table} WHERE thread_id = 'gone'"
                ).fetchone() == (0,)
        # its run's trace stays
        assert client.get(f"/runs/{old_run}").json()["status"] == "finished"
        # the id is free again, and the new thread does not know the old conversation
        assert (
            client.post("/threads", json={"id": "gone", "flow": "support_chat"}).status_code == 201
        )
        assert (
            turn(client, "gone", "What is my name?")["reply"]
            == "I'm sorry, I don't know your name yet."
        )
        assert client.get("/threads/gone/history").json()["total"] == 2


def test_delete_is_refused_while_a_turn_runs_or_waits(
    chat_yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(chat_yard, watch=False, schedules=False)
    with live.client() as client:
        client.post("/threads", json={"id": "busy", "flow": "slow_chat"})
        accepted = client.post(
            "/threads/busy/runs?wait=false", json={"inputs": {"message": "hi"}}
        ).json()
        refused = client.delete("/threads/busy")  # the turn is held by the server from its 202 on
        assert (
            error_of(refused) == (409, "thread_busy")
            and accepted["run_id"] in refused.json()["error"]["message"]
        )
        wait_run(client, accepted["run_id"])
        assert client.delete("/threads/busy").status_code == 204
        # a turn waiting for approval holds its thread too
        client.post("/threads", json={"id": "careful", "flow": "gated"})
        waiting = client.post("/threads/careful/runs", json={"inputs": {"a": 1}}).json()
        assert (
            waiting["status"] == "waiting"
            and waiting["reply"] is None
            and waiting["message"] is None
        )
        assert error_of(client.delete("/threads/careful")) == (409, "thread_busy")
        assert error_of(client.post("/threads/careful/runs", json={"inputs": {"a": 2}})) == (
            409,
            "thread_waiting",
        )
        decided = client.post(
            f"/runs/{waiting['run_id']}/resume", json={"approve": True, "values": {"b": 2}}
        )
        assert decided.json()["status"] == "finished"
        assert client.delete("/threads/careful").status_code == 204


FRAGILE = """
block: fragile
version: 1
description: Fails on a two-letter message.
kind: transform
inputs: {message: {type: string}}
outputs: {reply: {type: string}}
compute: {reply: "'share: ' ~ (10 // ((message | length) - 2))"}
"""

FRAGILE_CHAT = """
flow: fragile_chat
version: 1
description: Fails on a two-letter message.
inputs: {message: {type: string}}
outputs: [reply]
steps:
  - {id: answer, uses: fragile, with: {message: "{{ inputs.message }}"}}
"""


def test_a_failed_turn_of_a_deleted_thread_cannot_be_resumed(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard(
        {**CHAT_YARD, "blocks/fragile.yaml": FRAGILE, "flows/fragile_chat.yaml": FRAGILE_CHAT}
    )
    live = serve(root, watch=False, schedules=False)
    with live.client() as client:
        client.post("/threads", json={"id": "f", "flow": "fragile_chat"})
        failed = client.post("/threads/f/runs", json={"inputs": {"message": "hi"}}).json()
        assert (failed["status"], failed["reply"]) == ("failed", None)
        # a failed turn does not hold its thread
        assert client.delete("/threads/f").status_code == 204
        # the same id, another conversation
        client.post("/threads", json={"id": "f", "flow": "fragile_chat"})
        refused = client.post(f"/runs/{failed['run_id']}/resume")
        assert error_of(refused) == (422, "invalid_request")
        assert "thread 'f' was deleted" in refused.json()["error"]["message"]
        assert client.get("/threads/f").json()["turns"] == 0
