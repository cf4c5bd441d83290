"""Approval gates over HTTP: deciding, refused decisions, streaming a resume, timeouts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.serve.clock import ManualClock
from tests.serve.serve_helpers import GATED_FLOW, YARD, Live, read_sse, start_gated_run, wait_run

EXPIRING_FLOW = """
flow: expiring
version: 1
steps:
  - id: ask
    approval: {message: "Quick?", timeout: 1m, on_timeout: reject}
  - id: sum
    uses: adder
    with: {x: 1, y: 1}
"""


@pytest.fixture
def gated(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard({**YARD, "flows/gated.yaml": GATED_FLOW, "flows/expiring.yaml": EXPIRING_FLOW})


def test_a_waiting_run_shows_its_gate_and_takes_a_decision(gated: Path, serve: Callable[..., Live]) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        paused = start_gated_run(client, {"a": 2})
        [waiting] = paused["waiting"]
        assert waiting["value"]["message"] == "Add how much?"
        assert waiting["value"]["fields"] == {"b": {"type": "integer", "description": "The amount to add."}}
        [gate] = client.get(f"/runs/{paused['run_id']}").json()["gates"]
        assert (gate["step"], gate["message"]) == ("ask", "Add how much?")
        assert gate["interrupt_id"] == waiting["interrupt_id"]
        result = client.post(f"/runs/{paused['run_id']}/resume",
                             json={"approve": True, "values": {"b": 5}, "reason": "ok", "gate": "ask"}).json()
        assert (result["status"], result["outputs"]) == ("finished", {"total": 7})
        assert client.get(f"/runs/{paused['run_id']}").json()["gates"] == []


@pytest.mark.parametrize(("decision", "message"), [
    ({"approve": True, "values": {"b": "x"}}, "gate 'ask': field 'b' must be an integer, got string 'x'"),
    ({"approve": True, "values": {"c": 1}}, "gate 'ask' has no field 'c'; its fields: b"),
    ({"approve": True, "values": {"b": 1}, "gate": "nope"}, "has no gate 'nope' waiting; waiting: ask"),
])
def test_a_refused_decision_changes_nothing(gated: Path, serve: Callable[..., Live], decision: dict[str, object],
                                            message: str) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        refused = client.post(f"/runs/{run_id}/resume", json=decision)
        assert refused.status_code == 422
        assert message in refused.json()["error"]["message"]
        assert client.get(f"/runs/{run_id}").json()["status"] == "waiting"
        later = client.post(f"/runs/{run_id}/resume?wait=false", json={"approve": True, "values": {"b": 1}})
        assert later.status_code == 202
        assert wait_run(client, run_id)["outputs"] == {"total": 2}


def test_a_decision_can_be_streamed(gated: Path, serve: Callable[..., Live]) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        before = client.get(f"/runs/{run_id}/events", headers={"Accept": "application/json"}).json()["events"]
        with client.stream("POST", f"/runs/{run_id}/resume", json={"approve": True, "values": {"b": 3}},
                           headers={"Accept": "text/event-stream"}) as response:
            messages = read_sse(response)
        seqs = [int(m["id"]) for m in messages]
        assert seqs == list(range(before[-1]["seq"] + 1, before[-1]["seq"] + 1 + len(messages)))
        assert messages[-1]["event"] == "run_finished"
        assert messages[-1]["data"]["data"]["outputs"] == {"total": 4}


def test_a_rejected_gate_ends_the_run(gated: Path, serve: Callable[..., Live]) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        result = client.post(f"/runs/{run_id}/resume", json={"approve": False, "reason": "not today"}).json()
        # on_reject: end, so `total` is never written and the flow's declared output is missing
        assert result["status"] == "failed"
        assert result["error"] == "flow 'gated' finished without output 'total' (the context has no keys)"
        again = client.post(f"/runs/{run_id}/resume", json={"approve": True, "values": {"b": 1}})
        assert (again.status_code, again.json()["error"]["code"]) == (409, "not_waiting")


def test_a_gate_past_its_timeout_is_decided_by_the_server(gated: Path, serve: Callable[..., Live]) -> None:
    clock = ManualClock(datetime.now(UTC))
    live = serve(gated, watch=False, clock=clock)
    with live.client() as client:
        paused = client.post("/flows/expiring/runs", json={"inputs": {}}).json()
        assert paused["status"] == "waiting", paused
        assert client.get(f"/runs/{paused['run_id']}").json()["status"] == "waiting"
        clock.set(clock.now() + timedelta(minutes=2))  # the housekeeping wakes up and sees the timeout
        run = wait_run(client, paused["run_id"], ("finished", "failed"))
        assert (run["status"], run["outputs"]) == ("finished", {})
        trace = client.get(f"/runs/{paused['run_id']}/events", headers={"Accept": "application/json"}).json()
        decided = [e for e in trace["events"] if e["type"] == "approval_decided"]
        assert len(decided) == 1 and decided[0]["data"]["decision"] == "reject"
