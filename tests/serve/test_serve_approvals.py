"""Approval gates over HTTP: deciding, refused decisions, streaming a resume, timeouts."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import now_iso
from engine.runtime import approvals
from engine.serve.clock import ManualClock
from engine.spec.decisions import check_decision
from engine.state import gates
from engine.state.liveness import Owner
from tests.serve.serve_helpers import GATED_FLOW, YARD, Live, read_sse, start_gated_run, wait_run
from tests.support.state import state_db

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


def test_a_waiting_run_shows_its_gate_and_takes_a_decision(
    gated: Path, serve: Callable[..., Live]
) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        paused = start_gated_run(client, {"a": 2})
        [waiting] = paused["waiting"]
        assert waiting["value"]["message"] == "Add how much?"
        assert waiting["value"]["fields"] == {
            "b": {"type": "integer", "description": "The amount to add."}
        }
        [gate] = client.get(f"/runs/{paused['run_id']}").json()["gates"]
        assert (gate["step"], gate["message"]) == ("ask", "Add how much?")
        assert gate["interrupt_id"] == waiting["interrupt_id"]
        result = client.post(
            f"/runs/{paused['run_id']}/resume",
            json={"approve": True, "values": {"b": 5}, "reason": "ok", "gate": "ask"},
        ).json()
        assert (result["status"], result["outputs"]) == ("finished", {"total": 7})
        assert client.get(f"/runs/{paused['run_id']}").json()["gates"] == []


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (
            {"approve": True, "values": {"b": "x"}},
            "gate 'ask': field 'b' must be an integer, got string 'x'",
        ),
        ({"approve": True, "values": {"c": 1}}, "gate 'ask' has no field 'c'; its fields: b"),
        (
            {"approve": True, "values": {"b": 1}, "gate": "nope"},
            "has no gate 'nope' waiting; waiting: ask",
        ),
    ],
)
def test_a_refused_decision_changes_nothing(
    gated: Path, serve: Callable[..., Live], decision: dict[str, object], message: str
) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        refused = client.post(f"/runs/{run_id}/resume", json=decision)
        assert refused.status_code == 422
        assert message in refused.json()["error"]["message"]
        assert client.get(f"/runs/{run_id}").json()["status"] == "waiting"
        later = client.post(
            f"/runs/{run_id}/resume?wait=false", json={"approve": True, "values": {"b": 1}}
        )
        assert later.status_code == 202
        assert wait_run(client, run_id)["outputs"] == {"total": 2}


def test_a_decision_over_http_is_decision_approve_or_reject_with_approve_as_alias(
    gated: Path, serve: Callable[..., Live]
) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client, {"a": 2})["run_id"]
        for body, message in (
            (
                {"decision": "approve", "approve": False, "values": {"b": 1}},
                "decision 'approve' and approve=false disagree: give one of them",
            ),
            ({"decision": "maybe"}, "decision: Input should be 'approve' or 'reject'"),
        ):
            refused = client.post(f"/runs/{run_id}/resume", json=body)
            assert refused.status_code == 422, refused.text
            assert message in refused.json()["error"]["message"]
        done = client.post(
            f"/runs/{run_id}/resume", json={"decision": "approve", "values": {"b": 5}}
        ).json()
        assert (done["status"], done["outputs"]) == ("finished", {"total": 7})
        rejected = start_gated_run(client)["run_id"]
        assert (
            client.post(f"/runs/{rejected}/resume", json={"decision": "reject"}).json()["status"]
            == "failed"
        )
        aliased = start_gated_run(client, {"a": 1})["run_id"]  # the alias
        done = client.post(
            f"/runs/{aliased}/resume", json={"approve": True, "values": {"b": 1}}
        ).json()
        assert done["outputs"] == {"total": 2}
        waiting = start_gated_run(client)["run_id"]
        empty = client.post(f"/runs/{waiting}/resume", json={})
        assert empty.json()["error"]["message"].endswith(
            'send {"decision": "approve"} or {"decision": "reject"}'
        )


def test_a_decision_can_be_streamed(gated: Path, serve: Callable[..., Live]) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        before = client.get(
            f"/runs/{run_id}/events", headers={"Accept": "application/json"}
        ).json()["events"]
        with client.stream(
            "POST",
            f"/runs/{run_id}/resume",
            json={"approve": True, "values": {"b": 3}},
            headers={"Accept": "text/event-stream"},
        ) as response:
            messages = read_sse(response)
        seqs = [int(m["id"]) for m in messages]
        assert seqs == list(range(before[-1]["seq"] + 1, before[-1]["seq"] + 1 + len(messages)))
        assert messages[-1]["event"] == "run_finished"
        assert messages[-1]["data"]["data"]["outputs"] == {"total": 4}


def test_a_rejected_gate_ends_the_run(gated: Path, serve: Callable[..., Live]) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        result = client.post(
            f"/runs/{run_id}/resume", json={"approve": False, "reason": "not today"}
        ).json()
        # on_reject: end, so `total` is never written and the flow's declared output is missing
        assert result["status"] == "failed"
        assert (
            result["error"]
            == "flow 'gated' finished without output 'total' (the context has no keys)"
        )
        again = client.post(f"/runs/{run_id}/resume", json={"approve": True, "values": {"b": 1}})
        assert (again.status_code, again.json()["error"]["code"]) == (409, "already_decided")
        assert again.json()["error"]["message"].startswith(
            f"gate 'ask' of run {run_id} was already rejected at "
        )


def test_a_second_decision_is_409_with_the_gates_own_refusal(
    gated: Path, serve: Callable[..., Live]
) -> None:
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        first = client.post(
            f"/runs/{run_id}/resume", json={"approve": True, "values": {"b": 1}, "actor": "ada"}
        )
        assert first.json()["status"] == "finished", first.text
        again = client.post(f"/runs/{run_id}/resume", json={"approve": False, "actor": "grace"})
        assert again.status_code == 409, again.text
        error = again.json()["error"]
        assert error["code"] == "already_decided"
        assert error["message"].startswith(
            f"gate 'ask' of run {run_id} was already approved by ada at "
        ), error
        assert error["message"].endswith(
            f"; run {run_id} is finished, not waiting for an approval decision"
        )
        never = client.post(f"/runs/{start_gated_run(client)['run_id']}/resume", json={})
        assert (never.status_code, never.json()["error"]["code"]) == (409, "decision_needed")


def test_a_decision_that_loses_the_race_for_its_gate_is_409_with_the_gates_own_refusal(
    gated: Path, serve: Callable[..., Live], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica claims the gate between this server's reading it waiting and claiming it: the
    conditional claim refuses (engine/state/gates.py), and that refusal is a conflict, not a bad request."""
    real = check_decision  # what engine/runtime/approvals.py calls between reading the gate and claiming it
    raced: list[str] = []

    def check_then_lose(
        request: Mapping[str, Any], decision: str, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        values = real(request, decision, *args, **kwargs)
        if not raced:  # the other replica's decision lands first
            with state_db(gated) as conn:
                [gate] = gates.of_run(conn, run_id)
                payload = {
                    "decision": "approve",
                    "values": {"b": 9},
                    "actor": "ada",
                    "reason": None,
                    "time": now_iso(),
                    "timed_out": False,
                }
                other = Owner(
                    pid=4242,
                    host="replica-b.example",
                    start="1",
                    replica="b",
                    lease_until=time.time() + 600,
                )
                event = gates.claim(
                    gate, payload, other, {"gate": gate.gate, **payload}, now_iso()
                )(conn)
            raced.append(event.run_id)
        return values

    monkeypatch.setattr(approvals, "check_decision", check_then_lose)
    live = serve(gated, watch=False, schedules=False)
    with live.client() as client:
        run_id = start_gated_run(client)["run_id"]
        lost = client.post(
            f"/runs/{run_id}/resume", json={"approve": True, "values": {"b": 1}, "actor": "grace"}
        )
        assert raced == [run_id]
        assert lost.status_code == 409, lost.text
        assert lost.json()["error"]["code"] == "already_decided"
        assert lost.json()["error"]["message"].startswith(
            f"gate 'ask' of run {run_id} was already approved by ada at "
        )
        with state_db(gated) as conn:
            [row] = conn.execute(
                "SELECT status, actor FROM gates WHERE run_id = ?", (run_id,)
            ).fetchall()
        assert tuple(row) == ("approved", "ada")  # the winner's decision stands


def test_a_gate_past_its_timeout_is_decided_by_the_server(
    gated: Path, serve: Callable[..., Live]
) -> None:
    clock = ManualClock(datetime.now(UTC))
    live = serve(gated, watch=False, clock=clock)
    with live.client() as client:
        paused = client.post("/flows/expiring/runs", json={"inputs": {}}).json()
        assert paused["status"] == "waiting", paused
        assert client.get(f"/runs/{paused['run_id']}").json()["status"] == "waiting"
        # the housekeeping wakes up and sees the timeout
        clock.set(clock.now() + timedelta(minutes=2))
        run = wait_run(client, paused["run_id"], ("finished", "failed"))
        assert (run["status"], run["outputs"]) == ("finished", {})
        trace = client.get(
            f"/runs/{paused['run_id']}/events", headers={"Accept": "application/json"}
        ).json()
        decided = [e for e in trace["events"] if e["type"] == "approval_decided"]
        assert len(decided) == 1 and decided[0]["data"]["decision"] == "reject"
