"""Gates in LangChain's human-in-the-loop format over the LangGraph API, and JSON bodies whatever their
Content-Type (docs/langgraph-api.md): the real langgraph-sdk client and httpx against `blockyard serve` on
127.0.0.1 — what agent-chat-ui reads at a gate, the `{"decisions": [...]}` it resumes with, the older shapes,
and the `text/plain;charset=UTF-8` bodies its API passthrough forwards; an agent's tool call waiting for a person
(`approve_tools`) as the action of the call, decided as its block allows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import Command

from engine.serve.bodies import NOT_AN_OBJECT
from engine.serve.server import Settings
from tests.serve.langgraph_api.conftest import EXTRA, example_yard
from tests.serve.serve_helpers import Live, start_live
from tests.support.loopback import LOOPBACK

TIP = """
flow: tip
version: 1
description: Ask before adding a tip.
inputs:
  a: {type: integer, default: 1}
outputs: [total]
steps:
  - id: ask
    approval:
      message: "Add how much?"
      fields: {b: {type: integer, default: 2, description: The amount to add.}}
  - id: sum
    uses: adder
    with: {x: "{{ inputs.a }}", y: "{{ context.b }}"}
"""

NOD = """
flow: nod
version: 1
description: Ask, then count.
inputs: {}
outputs: [n]
steps:
  - id: ok
    approval: {message: "Go on?"}
  - id: one
    uses: inc
    with: {n: 41}
"""

# the example note keeper's agent with fewer decisions: a person may approve or reject its writes, not edit
# them; its step id picks the note keeper's scripted replies in the example blockyard.yaml
PICKY_FLOW = """
flow: picky_notes
version: 1
description: Keep notes; a person approves or rejects each write, as it is.
inputs: {message: {type: string}}
outputs: [reply]
steps:
  - id: note_keeper
    uses: picky_keeper
    with: {message: "{{ inputs.message }}"}
"""
PICKY_BLOCK = """
block: picky_keeper
version: 1
kind: agent
model: notes_demo
inputs: {message: {type: string}}
outputs: {reply: {type: string}}
prompt: {user: "{{ message }}"}
tools: [write_file]
approve_tools: {write_file: [approve, reject]}
"""
NOTE = {"path": "notes/note.md", "content": "Buy milk."}
SAY = {"messages": [{"role": "human", "content": "Remember to buy milk"}]}

PLAIN = {"Content-Type": "text/plain;charset=UTF-8"}  # what agent-chat-ui's passthrough forwards


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = example_yard(
        tmp_path_factory.mktemp("hitl"),
        {
            **EXTRA,
            "flows/tip.yaml": TIP,
            "flows/nod.yaml": NOD,
            "flows/picky_notes.yaml": PICKY_FLOW,
            "blocks/picky_keeper.yaml": PICKY_BLOCK,
        },
    )
    server = start_live(Settings(root=root, watch=False, schedules=False, grace=5.0, poll=0.1))
    yield server
    server.stop()


def lg(live: Live) -> Any:  # the SDK's TypedDict answers are looser than what the tests read
    return get_sync_client(url=live.url + "/lg")


def waiting(client: Any, flow: str = "tip") -> tuple[str, dict[str, Any]]:
    """A new thread whose run waits at the flow's gate, and the interrupt it waits with."""
    thread = client.threads.create()["thread_id"]
    [asked] = client.runs.wait(thread, flow, input={"a": 1})["__interrupt__"]
    return thread, asked


def decided(live: Live, client: Any, thread: str) -> dict[str, Any]:
    """The approval_decided event of the thread's run (who decided, how, why)."""
    run_id = client.runs.list(thread)[0]["run_id"]
    with live.client() as http:
        events = http.get(f"/runs/{run_id}/events", headers={"Accept": "application/json"}).json()[
            "events"
        ]
    [event] = [e for e in events if e["type"] == "approval_decided"]
    data: dict[str, Any] = event["data"]
    return data


def test_a_gate_interrupts_with_action_requests_and_review_configs(live: Live) -> None:
    client = lg(live)
    thread, asked = waiting(client)
    value = asked["value"]
    assert value["action_requests"] == [
        {"name": "ask", "args": {"b": 2}, "description": "Add how much?"}
    ]
    [review] = value["review_configs"]
    assert review["action_name"] == "ask" and review["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
    ]
    assert review["args_schema"]["properties"]["b"]["type"] == "integer"
    # the older agent-inbox shape and the gate's own keys are still there
    assert (
        value["action_request"] == {"action": "ask", "args": {"b": 2}}
        and value["config"]["allow_edit"] is True
    )
    assert (value["gate"], value["message"]) == ("ask", "Add how much?")
    # the thread's state (what agent-chat-ui reads) and a stream's updates carry the same value
    assert (
        client.threads.get_state(thread)["tasks"][0]["interrupts"][0]["value"]["action_requests"][
            0
        ]["name"]
        == "ask"
    )
    other = client.threads.create()["thread_id"]
    parts = [
        p.data
        for p in client.runs.stream(other, "tip", input={}, stream_mode="updates")
        if "__interrupt__" in p.data
    ]
    assert parts[0]["__interrupt__"][0]["value"]["review_configs"] == value["review_configs"]
    # a gate with a field that has no default cannot be approved as it asks: only edit approves it
    strict = client.threads.create()["thread_id"]
    needs = client.runs.wait(strict, "gated", input={"a": 1})["__interrupt__"][0]["value"]
    assert needs["action_requests"][0]["args"] == {"b": None}
    assert needs["review_configs"][0]["allowed_decisions"] == ["edit", "reject"]
    assert needs["config"]["allow_accept"] is False and needs["config"]["allow_edit"] is True
    # a gate with no fields offers no edit, and is approved with the decisions answer too
    nod = client.threads.create()["thread_id"]
    plain = client.runs.wait(nod, "nod", input={})["__interrupt__"][0]["value"]
    assert plain["action_requests"] == [{"name": "ok", "args": {}, "description": "Go on?"}]
    assert plain["review_configs"] == [
        {"action_name": "ok", "allowed_decisions": ["approve", "reject"]}
    ]
    assert (
        client.runs.wait(nod, "nod", command=Command(resume={"decisions": [{"type": "approve"}]}))[
            "n"
        ]
        == 42
    )


def test_approve_edit_reject_and_respond(live: Live) -> None:
    client = lg(live)
    thread, _ = waiting(client)
    assert (
        client.runs.wait(
            thread, "tip", command=Command(resume={"decisions": [{"type": "approve"}]})
        )["total"]
        == 3
    )
    assert client.threads.get(thread)["status"] == "idle"
    # edit: the changed fields land in the outputs; a form edits every value as text, read like `--set b=5`
    for edited, total in (({"b": "5"}, 6), ({"b": 7}, 8), ({"b": None}, 3)):
        thread, _ = waiting(client)
        answer = {"decisions": [{"type": "edit", "edited_action": {"name": "ask", "args": edited}}]}
        assert client.runs.wait(thread, "tip", command=Command(resume=answer))["total"] == total, (
            edited
        )
    # reject: the message is the decision's reason; the flow's gate ends the run (its output is missing)
    for kind in ("reject", "respond"):
        thread, _ = waiting(client)
        answer = {"decisions": [{"type": kind, "message": f"not today ({kind})"}]}
        ended = client.runs.wait(thread, "tip", command=Command(resume=answer), raise_error=False)
        assert "total" not in ended and ended["__error__"]["error"] == "RunFailed"
        shown = decided(live, client, thread)
        assert (shown["decision"], shown["reason"]) == ("reject", f"not today ({kind})"), shown


def test_an_agents_tool_call_is_an_action_request_of_the_call_decided_as_its_block_allows(
    live: Live,
) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    [asked] = client.runs.wait(thread, "note_keeper", input=SAY)["__interrupt__"]
    value = asked["value"]
    assert (value["kind"], value["gate"], value["tool"]) == (
        "tool",
        "keep:write_file",
        "write_file",
    )
    [action] = value["action_requests"]
    assert (action["name"], action["args"]) == ("write_file", NOTE)
    assert action["description"].startswith("agent 'note_keeper' asks to call write_file(")
    [review] = value["review_configs"]
    assert review["allowed_decisions"] == ["approve", "edit", "reject"]
    assert review["args_schema"]["properties"]["path"]["type"] == "string"
    assert value["action_request"] == {"action": "write_file", "args": NOTE}
    # an edit changes the call's arguments; the agent answers from the file written
    edit = {
        "type": "edit",
        "edited_action": {"name": "write_file", "args": {**NOTE, "path": "x.md"}},
    }
    done = client.runs.wait(thread, "note_keeper", command=Command(resume={"decisions": [edit]}))
    assert done["messages"][-1]["content"] == "Saved. You can read it with blockyard runs show."
    assert decided(live, client, thread)["values"] == {**NOTE, "path": "x.md"}

    # a block that allows approve and reject only: its request offers those, and an edit is refused
    picky = client.threads.create()["thread_id"]
    [asked] = client.runs.wait(picky, "picky_notes", input=SAY)["__interrupt__"]
    value = asked["value"]
    assert value["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    assert value["config"]["allow_edit"] is False and value["config"]["allow_accept"] is True
    with pytest.raises(httpx.HTTPStatusError, match="422") as refused:
        client.runs.wait(picky, "picky_notes", command=Command(resume={"decisions": [edit]}))
    assert "gate 'note_keeper:write_file' cannot be edited" in refused.value.response.text
    assert client.threads.get(picky)["status"] == "interrupted"
    no = {"type": "reject", "message": "not now"}
    done = client.runs.wait(picky, "picky_notes", command=Command(resume={"decisions": [no]}))
    assert done["messages"][-1]["content"].startswith("All right, I did not save it.")
    assert decided(live, client, picky)["reason"] == "not now"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {
                "decisions": [
                    {"type": "edit", "edited_action": {"name": "ask", "args": {"b": "five"}}}
                ]
            },
            "'b'",
        ),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "ask", "args": {"c": 1}}}]},
            "has no field 'c'",
        ),
        ({"decisions": [{"type": "edit", "edited_action": {"name": "ask"}}]}, "edited_action"),
        ({"decisions": [{"type": "edit"}]}, "edited_action"),
        ({"decisions": [{"type": "approve"}, {"type": "approve"}]}, "one decision"),
        ({"decisions": []}, "one decision"),
        ({"decisions": ["approve"]}, "one decision"),
        ({"decisions": [{"type": "maybe"}]}, "unknown decision type 'maybe'"),
        ({"decisions": [{"type": "reject", "message": 5}]}, "`message` must be text"),
        ({"decisions": [{"type": "approve"}], "b": 1}, "only `decisions`"),
    ],
)
def test_a_wrong_decision_is_a_422_and_the_gate_keeps_waiting(
    live: Live, answer: dict[str, Any], message: str
) -> None:
    client = lg(live)
    thread, _ = waiting(client)
    with pytest.raises(httpx.HTTPStatusError, match="422") as refused:
        client.runs.wait(thread, "tip", command=Command(resume=answer))
    assert refused.value.response.status_code == 422, refused.value.response.text
    assert message in refused.value.response.json()["error"]["message"]
    assert client.threads.get(thread)["status"] == "interrupted"


def test_the_older_shapes_and_the_engines_own_decisions_still_decide(live: Live) -> None:
    client = lg(live)
    for resume, total in (
        ({"decision": "approve"}, 3),
        ({"approve": True, "b": 4}, 5),
        (True, 3),
        ([{"type": "accept", "args": None}], 3),
        ([{"type": "edit", "args": {"action": "ask", "args": {"b": 6}}}], 7),
    ):
        thread, asked = waiting(client)
        assert client.runs.wait(thread, "tip", command=Command(resume=resume))["total"] == total, (
            resume
        )
        keyed, asked = waiting(client)  # keyed by the interrupt id, as for several interrupts
        assert (
            client.runs.wait(keyed, "tip", command=Command(resume={asked["id"]: resume}))["total"]
            == total
        )
    thread, asked = waiting(client)
    keyed_decisions = {
        asked["id"]: {"decisions": [{"type": "edit", "edited_action": {"args": {"b": "10"}}}]}
    }
    assert client.runs.wait(thread, "tip", command=Command(resume=keyed_decisions))["total"] == 11
    with live.client() as http:  # the engine's own API: `decision` and its alias `approve`
        for body in ({"decision": "approve", "values": {"b": 1}}, {"approve": True}):
            run = http.post("/flows/tip/runs", json={"inputs": {"a": 1}}).json()
            done = http.post(f"/runs/{run['run_id']}/resume", json=body).json()
            assert done["status"] == "finished" and done["outputs"]["total"] in (2, 3), done


def test_a_json_body_is_read_whatever_its_content_type(live: Live) -> None:
    with httpx.Client(base_url=live.url, timeout=30, verify=LOOPBACK) as http:
        # the engine's API
        run = http.post("/flows/tip/runs", content=json.dumps({"inputs": {"a": 2}}), headers=PLAIN)
        assert run.status_code == 200 and run.json()["status"] == "waiting", run.text
        done = http.post(
            f"/runs/{run.json()['run_id']}/resume", content='{"decision": "approve"}', headers=PLAIN
        )
        assert done.json()["outputs"] == {"total": 4}, done.text
        # no Content-Type at all
        made = http.post("/threads", content='{"flow": "tip"}', headers={})
        assert made.status_code in (200, 201), made.text
        # the LangGraph API, as agent-chat-ui's passthrough sends it
        thread = http.post("/lg/threads", content="{}", headers=PLAIN)
        assert thread.status_code == 200, thread.text
        thread_id = thread.json()["thread_id"]
        found = http.post(
            "/lg/threads/search", content=json.dumps({"ids": [thread_id]}), headers=PLAIN
        )
        assert [t["thread_id"] for t in found.json()] == [thread_id]
        patched = http.patch(
            f"/lg/threads/{thread_id}", content='{"metadata": {"who": "ada"}}', headers=PLAIN
        )
        assert patched.json()["metadata"]["who"] == "ada", patched.text
        put = http.put(
            "/lg/store/items",
            content='{"namespace": ["t"], "key": "k", "value": {"v": 1}}',
            headers=PLAIN,
        )
        assert put.status_code in (200, 204), put.text
        body = {"assistant_id": "tip", "input": {"a": 1}}
        asked = http.post(
            f"/lg/threads/{thread_id}/runs/wait", content=json.dumps(body), headers=PLAIN
        ).json()
        assert asked["__interrupt__"][0]["value"]["action_requests"][0]["name"] == "ask", asked
        resume = {
            "assistant_id": "tip",
            "command": {
                "resume": {
                    "decisions": [
                        {"type": "edit", "edited_action": {"name": "ask", "args": {"b": "41"}}}
                    ]
                }
            },
        }
        answer = http.post(
            f"/lg/threads/{thread_id}/runs/wait", content=json.dumps(resume), headers=PLAIN
        ).json()
        assert answer["total"] == 42, answer
        # a body that is not JSON is still a 422 saying so, whatever its type
        for path in ("/lg/threads", "/flows/tip/runs", "/lg/threads/search"):
            for content, headers in (
                ("a=1", PLAIN),
                ("{'a': 1}", {}),
                ("a=1", {"Content-Type": "text/html"}),
            ):
                refused = http.post(path, content=content, headers=headers)
                assert refused.status_code == 422, (path, refused.text)
                assert refused.json()["error"]["message"] == NOT_AN_OBJECT
        # said to be JSON and not: the 400 it always was
        bad = http.post("/lg/threads", content="{", headers={"Content-Type": "application/json"})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "malformed_json")
