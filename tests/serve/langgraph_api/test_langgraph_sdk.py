"""`blockyard serve` driven by the real langgraph-sdk client over HTTP on 127.0.0.1 (docs/langgraph-api.md)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import Command

from engine.serve.server import Settings
from engine.state.memory import open_store, preferences, set_preference
from tests.serve.langgraph_api.conftest import example_yard
from tests.serve.serve_helpers import Live, start_live, wait_for
from tests.support.loopback import LOOPBACK

HUMAN = "human"


def lg(live: Live) -> Any:  # the SDK's TypedDict answers are looser than what the tests read
    return get_sync_client(url=live.url + "/lg")


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"type": HUMAN, "content": text}]}


def test_info_ok_and_assistants_are_the_flows(live: Live) -> None:
    client = lg(live)
    assert client.http.get("/ok") == {"ok": True}
    assert client.http.get("/info")["flags"]["assistants"] is True
    found = client.assistants.search(limit=100)
    names = [a["assistant_id"] for a in found]
    assert {"support_chat", "gated", "hello"} <= set(names)
    assert client.assistants.search(graph_id="gated")[0]["graph_id"] == "gated"
    one = client.assistants.get("support_chat")
    flows = httpx.get(live.url + "/flows/support_chat", verify=LOOPBACK).json()
    assert one["version"] == flows["version"] and one["metadata"]["digest"] == flows["digest"]
    drawn = client.assistants.get_graph("gated")
    assert {"__start__", "ask", "sum", "__end__"} <= {node["id"] for node in drawn["nodes"]}
    assert {(e["source"], e["target"]) for e in drawn["edges"]} >= {("ask", "sum")}
    schemas = client.assistants.get_schemas("gated")
    assert schemas["input_schema"]["properties"]["a"]["type"] == "integer"
    assert schemas["output_schema"]["required"] == ["total"]
    chat = client.assistants.get_schemas("support_chat")["input_schema"]
    assert "messages" in chat["properties"] and {"required": ["message"]} in chat["anyOf"]
    with pytest.raises(httpx.HTTPStatusError, match="unknown flow 'nope'") as missing:
        client.assistants.get("nope")
    assert missing.value.response.status_code == 404


def test_threads_create_get_search_delete(live: Live) -> None:
    client = lg(live)
    made = client.threads.create(thread_id="lg-crud", metadata={"user": "ada"})
    assert (
        made["thread_id"] == "lg-crud"
        and made["status"] == "idle"
        and made["metadata"] == {"user": "ada"}
    )
    assert (
        client.threads.create(thread_id="lg-crud", if_exists="do_nothing")["thread_id"] == "lg-crud"
    )
    with pytest.raises(
        httpx.HTTPStatusError, match="thread id 'lg-crud' is already taken"
    ) as taken:
        client.threads.create(thread_id="lg-crud")
    assert taken.value.response.status_code == 409
    assert [t["thread_id"] for t in client.threads.search(metadata={"user": "ada"})] == ["lg-crud"]
    client.runs.wait("lg-crud", "support_chat", input=said("hi"))
    # the flow a thread talks to is searchable as chat UIs search for it
    assert "lg-crud" in [
        t["thread_id"]
        for t in client.threads.search(metadata={"graph_id": "support_chat"}, limit=100)
    ]
    assert client.threads.get("lg-crud")["values"]["messages"][0]["content"] == "hi"
    client.threads.delete("lg-crud")
    with pytest.raises(httpx.HTTPStatusError, match="unknown thread 'lg-crud'") as gone:
        client.threads.get("lg-crud")
    assert gone.value.response.status_code == 404


def test_three_turns_of_support_chat_with_state_and_history(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    replies = [
        client.runs.wait(thread, "support_chat", input=said(text))["messages"][-1]["content"]
        for text in ("My name is Ada", "I need help", "What is my name?")
    ]
    assert replies[2] == "Your name is Ada."  # the model was sent turn 1 as history
    state = client.threads.get_state(thread)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"] * 3
    assert state["values"]["messages"][4]["content"] == "What is my name?"
    assert state["next"] == [] and state["tasks"] == []
    history = client.threads.get_history(thread)
    # newest first: each turn's end and its input, then the thread's start
    assert len(history) == 7
    assert [len(h["values"]["messages"]) for h in history] == [6, 5, 4, 3, 2, 1, 0]
    assert [h["metadata"]["source"] for h in history] == ["loop", "input"] * 3 + ["input"]
    for newer, older_state in itertools.pairwise(history):
        assert (
            newer["parent_checkpoint"]["checkpoint_id"]
            == older_state["checkpoint"]["checkpoint_id"]
        )
    assert history[-1]["checkpoint"]["checkpoint_id"] == "__start__"
    assert history[-1]["parent_checkpoint"] is None
    older = client.threads.get_history(thread, before=history[0]["checkpoint"])
    assert [len(h["values"]["messages"]) for h in older] == [5, 4, 3, 2, 1, 0]
    runs = client.runs.list(thread)
    assert len(runs) == 3 and {r["status"] for r in runs} == {"success"}


def test_stream_modes(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread,
            "support_chat",
            input=said("My name is Ada"),
            stream_mode=["values", "updates", "messages-tuple", "events"],
        )
    )
    assert parts[0].event == "metadata" and parts[0].data["thread_id"] == thread
    kinds = [p.event for p in parts]
    assert {"values", "updates", "messages", "events"} <= set(kinds)
    tokens = "".join(p.data[0]["content"] for p in parts if p.event == "messages")
    reply = "Thanks for writing to ACME support. How can I help you today?"
    assert tokens == reply
    assert [p.data for p in parts if p.event == "updates"] == [{"answer": {"reply": reply}}]
    last = [p.data for p in parts if p.event == "values"][-1]
    assert [m["content"] for m in last["messages"]] == ["My name is Ada", reply]
    assert {p.data["event"] for p in parts if p.event == "events"} >= {
        "on_chain_start",
        "on_chain_end",
        "on_chat_model_stream",
    }
    custom = list(client.runs.stream(None, "count", input={}, stream_mode="custom"))
    assert [p.data for p in custom if p.event == "custom"] == [{"done": 42}]
    messages = list(
        client.runs.stream(None, "support_chat", input={"message": "hello"}, stream_mode="messages")
    )
    assert [p.event for p in messages][1:2] == ["messages/metadata"], [
        (p.event, p.data) for p in messages
    ]
    assert [p.data[0]["content"] for p in messages if p.event == "messages/complete"] == [reply]
    assert client.runs.wait(None, "count", input={}) == {"n": 42}  # no message input: no messages


def test_an_approval_gate_is_an_interrupt_resumed_with_a_command(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    waiting = client.runs.wait(thread, "gated", input={"a": 1})
    [asked] = waiting["__interrupt__"]
    assert asked["value"]["message"] == "Add how much?" and "b" in asked["value"]["fields"]
    state = client.threads.get_state(thread)
    assert state["tasks"][0]["interrupts"][0]["id"] == asked["id"] and state["next"] == ["ask"]
    assert client.threads.get(thread)["status"] == "interrupted"
    for wrong in ({"b": "five"}, {"c": 1}, {"approve": "maybe"}):
        with pytest.raises(httpx.HTTPStatusError, match="422 Unprocessable Entity") as refused:
            client.runs.wait(thread, "gated", command=Command(resume=wrong))
        assert refused.value.response.status_code == 422, refused.value.response.text
    assert client.threads.get(thread)["status"] == "interrupted"  # still waiting
    parts = list(
        client.runs.stream(thread, "gated", command=Command(resume={"b": 5}), stream_mode="values")
    )
    assert parts[-1].data["total"] == 6
    assert client.threads.get(thread)["status"] == "idle"
    # an interrupt chat UIs render as a form, answered the agent-inbox way: a rejection
    other = client.threads.create()["thread_id"]
    interrupted = [
        p.data
        for p in client.runs.stream(other, "gated", input={"a": 1}, stream_mode="updates")
        if "__interrupt__" in p.data
    ]
    assert interrupted[0]["__interrupt__"][0]["value"]["action_request"]["action"] == "ask"
    ended = client.runs.wait(
        other,
        "gated",
        command=Command(resume=[{"type": "ignore", "args": None}]),
        raise_error=False,
    )
    # a rejected gate fails the run
    assert "total" not in ended and ended["__error__"]["error"] == "RunFailed"
    assert client.threads.get(other)["status"] == "error"


def test_the_store_is_the_flows_memory(live: Live) -> None:
    client = lg(live)
    client.store.put_item(["users", "ada", "preferences"], "usual", {"value": "Chipotle"})
    assert client.store.get_item(["users", "ada", "preferences"], "usual")["value"] == {
        "value": "Chipotle"
    }
    assert live.server.service is not None
    # the server's own state database (on Postgres, the module's server keeps the database it started on)
    with open_store(live.server.service.engine.location) as store:
        assert preferences(store, "users/ada") == {
            "usual": "Chipotle"
        }  # what a flow's memory reads
        # and what a flow's memory writes (kept as its JSON text, key order and all) reads back as written
        set_preference(store, "users/bob", "order", {"restaurant": "Chipotle", "dish": "burrito"})
    shown = client.store.get_item(["users", "bob", "preferences"], "order")["value"]
    assert shown == {"value": {"restaurant": "Chipotle", "dish": "burrito"}}
    assert list(shown["value"]) == ["restaurant", "dish"]
    found = client.store.search_items(["users"], filter={"value": "Chipotle"})
    assert [item["key"] for item in found["items"]] == ["usual"]
    assert ["users", "ada", "preferences"] in client.store.list_namespaces(prefix=["users"])[
        "namespaces"
    ]
    client.store.delete_item(["users", "ada", "preferences"], "usual")
    # a missing item is null, as LangGraph's server answers it: clients check for None
    assert client.store.get_item(["users", "ada", "preferences"], "usual") is None


def test_a_bad_store_filter_is_a_422_naming_what_is_wrong(live: Live) -> None:
    client = lg(live)
    client.store.put_item(["filters"], "one", {"n": 2, "tag": "x"})
    assert [
        item["key"]
        for item in client.store.search_items(["filters"], filter={"n": {"$gt": 1}})["items"]
    ] == ["one"]
    for bad, said in (
        ({"a' OR 1=1 --": {"$gt": 1}}, "invalid key"),
        ({"a": {"$where": "1"}}, "unsupported operator"),
    ):
        with pytest.raises(httpx.HTTPStatusError, match=r"^filter") as refused:
            client.store.search_items(["filters"], filter=bad)
        assert refused.value.response.status_code == 422, refused.value.response.text
        assert said in refused.value.response.json()["error"]["message"]
    with live.client() as http:  # what the SDK cannot send: integers past 64 bits, a lone surrogate
        for body, said in (
            ('{"filter": {"n": {"$gt": 1' + "0" * 30 + "}}}", "64 bits"),
            ('{"filter": {"n": 1' + "0" * 400 + "}}", "64 bits"),
            ('{"filter": {"n": "\\ud800"}}', "surrogate"),
        ):
            answer = http.post(
                "/lg/store/items/search", content=body, headers={"Content-Type": "application/json"}
            )
            assert answer.status_code == 422 and said in answer.json()["error"]["message"], (
                answer.text
            )


def test_cancel_a_run_and_multitask_strategies(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "slow", input={"a": 1})
    assert run["status"] in ("pending", "running")
    with pytest.raises(httpx.HTTPStatusError, match="has a run going on") as busy:
        client.runs.create(thread, "slow", input={"a": 2})  # multitask_strategy reject, the default
    assert busy.value.response.status_code == 409
    client.runs.cancel(thread, run["run_id"], wait=True)
    assert client.runs.get(thread, run["run_id"])["status"] == "interrupted"
    first = client.runs.create(thread, "slow", input={"a": 1})
    second = client.runs.create(thread, "slow", input={"a": 2}, multitask_strategy="enqueue")
    assert client.runs.join(thread, second["run_id"])["total"] == 12
    assert client.runs.get(thread, first["run_id"])["status"] == "success"


def test_double_texting_interrupt_keeps_the_turn_it_stops_and_rollback_deletes_it(
    live: Live,
) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    first = client.runs.create(thread, "sleepy", input={})
    # answered once the turn going on is stopped and recorded: nothing to wait for
    second = client.runs.create(thread, "sleepy", input={}, multitask_strategy="interrupt")
    stopped = client.runs.get(thread, first["run_id"])
    assert stopped["status"] == "interrupted"
    shown = live.client().get(f"/runs/{first['run_id']}").json()
    assert shown["error"] == (
        f"interrupted by a newer turn of thread '{thread}' (multitask_strategy: interrupt)"
    )
    assert client.runs.get(thread, second["run_id"])["status"] in ("pending", "running")
    third = client.runs.create(thread, "sleepy", input={}, multitask_strategy="rollback")
    with pytest.raises(httpx.HTTPStatusError, match=f"has no run '{second['run_id']}'") as gone:
        client.runs.get(thread, second["run_id"])
    assert gone.value.response.status_code == 404
    assert live.client().get(f"/runs/{second['run_id']}/events").status_code == 404
    client.runs.join(thread, third["run_id"])
    assert client.runs.get(thread, third["run_id"])["status"] == "success"
    listed = {run["run_id"]: run["status"] for run in client.runs.list(thread)}
    assert listed == {first["run_id"]: "interrupted", third["run_id"]: "success"}
    # two finished or kept turns: the rolled-back one no longer counts
    assert live.client().get(f"/threads/{thread}").json()["turns"] == 2
    # a turn cancelled with action=rollback is deleted once it stopped
    last = client.runs.create(thread, "sleepy", input={})
    client.runs.cancel(thread, last["run_id"], action="rollback")
    assert [run["run_id"] for run in client.runs.list(thread)] == [
        third["run_id"],
        first["run_id"],
    ]
    # with nothing going on, interrupt and rollback simply start the turn
    for strategy in ("interrupt", "rollback"):
        idle = client.threads.create()["thread_id"]
        started = client.runs.create(idle, "count", input={}, multitask_strategy=strategy)
        assert client.runs.join(idle, started["run_id"])["n"] == 42


def test_reconnect_a_stream_with_last_event_id(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread, "hello", input={"name": "Ada"}, stream_mode=["values", "updates"]
        )
    )
    run_id = parts[0].data["run_id"]
    ids = [p.id for p in parts[1:]]
    assert len(ids) >= 4 and all(ids)
    cut = 2
    rest = list(
        client.runs.join_stream(
            thread, run_id, last_event_id=ids[cut], stream_mode=["values", "updates"]
        )
    )
    assert [(p.event, p.data, p.id) for p in rest] == [
        (p.event, p.data, p.id) for p in parts[cut + 2 :]
    ]
    # joining a live run: a second client follows the run it did not start
    other = client.threads.create()["thread_id"]
    run = client.runs.create(other, "slow", input={"a": 1}, stream_mode=["values"])
    joined = list(client.runs.join_stream(other, run["run_id"], stream_mode="values"))
    assert joined[-1].data["total"] == 11


def test_joining_a_finished_run_without_stream_mode_replays_its_own_modes(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread, "hello", input={"name": "Ada"}, stream_mode=["values", "updates"]
        )
    )
    run_id = parts[0].data["run_id"]
    # langgraph-sdk sends `stream_mode=` for None
    joined = list(client.runs.join_stream(thread, run_id))
    assert [(p.event, p.data) for p in joined] == [(p.event, p.data) for p in parts]
    only = list(client.runs.join_stream(thread, run_id, stream_mode="updates"))
    assert [p.event for p in only] == [
        "metadata",
        *(["updates"] * len([p for p in parts if p.event == "updates"])),
    ]
    # the default mode: values
    background = client.runs.create(thread, "hello", input={"name": "Bo"})
    client.runs.join(thread, background["run_id"])
    assert {p.event for p in client.runs.join_stream(thread, background["run_id"])} == {
        "metadata",
        "values",
    }


def test_an_enqueued_run_is_pending_and_cancelled_it_is_interrupted(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    first = client.runs.create(thread, "sleepy", input={})
    second = client.runs.create(thread, "sleepy", input={}, multitask_strategy="enqueue")
    assert second["status"] == "pending"
    assert client.runs.get(thread, second["run_id"])["status"] == "pending"
    assert {r["run_id"]: r["status"] for r in client.runs.list(thread)}[
        second["run_id"]
    ] == "pending"
    assert [r["run_id"] for r in client.runs.list(thread, status="pending")] == [second["run_id"]]
    client.runs.cancel(thread, second["run_id"], wait=True)
    assert client.runs.get(thread, second["run_id"])["status"] == "interrupted"
    assert {r["run_id"]: r["status"] for r in client.runs.list(thread)}[
        second["run_id"]
    ] == "interrupted"
    client.runs.cancel(thread, first["run_id"], wait=True)
    assert client.runs.get(thread, first["run_id"])["status"] == "interrupted"


def test_thread_metadata_is_bounded(live: Live) -> None:
    client = lg(live)
    with pytest.raises(
        httpx.HTTPStatusError, match="a thread's metadata takes at most 65536"
    ) as refused:
        client.threads.create(metadata={"x": "y" * 3_000_000})
    assert refused.value.response.status_code == 413, refused.value.response.text
    assert refused.value.response.json()["error"]["code"] == "metadata_too_large"
    thread = client.threads.create(metadata={"user": "ada"})["thread_id"]
    for n in range(3):
        client.threads.update(thread, metadata={f"k{n}": "z" * 20_000})
    # each PATCH is small; what they merge into is not
    with pytest.raises(
        httpx.HTTPStatusError, match="a thread's metadata takes at most 65536"
    ) as grown:
        client.threads.update(thread, metadata={"k3": "z" * 20_000})
    assert grown.value.response.status_code == 413, grown.value.response.text
    assert (
        "64" in grown.value.response.json()["error"]["message"]
        or "65536" in grown.value.response.text
    )
    kept = client.threads.get(thread)["metadata"]
    assert set(kept) >= {"user", "k0", "k1", "k2"} and "k3" not in kept
    client.threads.update(thread, metadata={"k0": "small"})  # replacing a key shrinks it: fine
    found = client.http.post("/threads/search", json={"ids": [thread], "limit": 1000})
    assert len(json.dumps(found)) < 100_000


def test_token_rules_apply_under_the_prefix(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = example_yard(tmp_path_factory.mktemp("tokened"), {})
    (root / "blockyard.yaml").write_text(
        (root / "blockyard.yaml").read_text(encoding="utf-8")
        + "\nserver:\n  langgraph_prefix: /api/langgraph\n",
        encoding="utf-8",
    )
    live = start_live(
        Settings(root=root, token="s3cret", watch=False, schedules=False, grace=5.0, poll=0.1)
    )
    try:
        # public, like /healthz
        assert httpx.get(live.url + "/api/langgraph/ok", verify=LOOPBACK).status_code == 200
        assert (
            httpx.post(
                live.url + "/api/langgraph/assistants/search", json={}, verify=LOOPBACK
            ).status_code
            == 401
        )
        assert (
            httpx.post(
                live.url + "/lg/assistants/search",
                json={},
                headers={"Authorization": "Bearer s3cret"},
                verify=LOOPBACK,
            ).status_code
            == 404
        )  # not the prefix now
        keyed = get_sync_client(url=live.url + "/api/langgraph", api_key="s3cret")
        assert "hello" in [a["assistant_id"] for a in keyed.assistants.search(limit=100)]
        bearer: Any = get_sync_client(
            url=live.url + "/api/langgraph",
            api_key=None,
            headers={"Authorization": "Bearer s3cret"},
        )
        assert bearer.runs.wait(None, "hello", input={"name": "Ada"})["name"] == "Ada"
        wrong = get_sync_client(url=live.url + "/api/langgraph", api_key="nope")
        with pytest.raises(httpx.HTTPStatusError, match="this server needs a token") as refused:
            wrong.assistants.search()
        assert refused.value.response.status_code == 401
    finally:
        live.stop()


def test_bad_requests_are_4xx(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    run_id = (
        client.runs.wait(thread, "hello", input={"name": "x"}, raise_error=False)
        and client.runs.list(thread)[0]["run_id"]
    )
    for huge in (
        "9" * 5000,
        "1." + "9" * 5000,
    ):  # past Python's 4300 digits for int(): a 400, not a 500
        with pytest.raises(
            httpx.HTTPStatusError, match="Last-Event-ID must be an id this stream sent"
        ) as bad_id:
            list(client.runs.join_stream(thread, run_id, last_event_id=huge))
        assert bad_id.value.response.status_code == 400
    cases: list[Callable[[], Any]] = [
        lambda: client.runs.wait(thread, "nope", input={}),
        lambda: client.runs.wait("no-such-thread", "hello", input={"name": "x"}),
        lambda: client.runs.wait(
            thread, "gated", input={"messages": [{"type": "human", "content": "x"}]}
        ),
        lambda: client.runs.wait(thread, "hello", input={"bogus": 1}),
        lambda: client.runs.wait(thread, "hello", command=Command(resume=True)),
        lambda: client.runs.wait(
            thread, "hello", input={"name": "x"}, multitask_strategy="overtake"
        ),
    ]
    for case in cases:
        with pytest.raises(httpx.HTTPStatusError, match="Client error '4") as refused:
            case()
        assert 400 <= refused.value.response.status_code < 500, refused.value.response.text
    made = client.runs.wait("made-on-demand", "hello", input={"name": "x"}, if_not_exists="create")
    assert made["name"] == "x"
    assert wait_for(lambda: client.threads.get("made-on-demand")["status"] == "idle")
