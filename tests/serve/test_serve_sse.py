"""Server-sent events: streamed runs, replay, Last-Event-ID reconnection, heartbeats, other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.serve.serve_helpers import YARD, Live, read_sse, wait_for, wait_run
from tests.support import processes

STREAM = {"Accept": "text/event-stream"}
SLOW_TYPES = [
    "run_started",
    "step_started",
    "step_finished",
    "step_started",
    "step_finished",
    "run_finished",
]


@pytest.fixture
def live(yard: Path, serve: Callable[..., Live]) -> Live:
    return serve(yard, watch=False, schedules=False)


def test_a_run_can_be_streamed_as_it_happens(live: Live) -> None:
    with (
        live.client() as client,
        client.stream(
            "POST", "/flows/slow/runs", json={"inputs": {"a": 2}}, headers=STREAM
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        messages = read_sse(response)
    assert [m["event"] for m in messages] == SLOW_TYPES
    assert [m["id"] for m in messages] == ["1", "2", "3", "4", "5", "6"]
    assert all(
        m["data"]["seq"] == int(m["id"]) and m["data"]["type"] == m["event"] for m in messages
    )
    assert [m["data"]["step"] for m in messages] == [None, "nap", "nap", "sum", "sum", None]
    assert messages[-1]["data"]["data"]["outputs"] == {"total": 12}


def test_a_stream_of_a_refused_run_is_a_clear_error(live: Live) -> None:
    with live.client() as client:
        response = client.post("/flows/add/runs", json={"inputs": {"a": "x"}}, headers=STREAM)
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"


def test_the_trace_is_replayed_and_last_event_id_skips_what_was_seen(live: Live) -> None:
    with live.client() as client:
        run_id = client.post("/flows/slow/runs", json={"inputs": {}}).json()["run_id"]
        with client.stream("GET", f"/runs/{run_id}/events", headers=STREAM) as response:
            everything = read_sse(response)
        assert [m["event"] for m in everything] == SLOW_TYPES
        with client.stream(
            "GET", f"/runs/{run_id}/events", headers={**STREAM, "Last-Event-ID": "3"}
        ) as response:
            rest = read_sse(response)
        assert [m["id"] for m in rest] == ["4", "5", "6"]
        with client.stream("GET", f"/runs/{run_id}/events?after=5", headers=STREAM) as response:
            assert [m["id"] for m in read_sse(response)] == ["6"]
        stored = client.get(
            f"/runs/{run_id}/events", headers={"Accept": "application/json"}
        ).json()["events"]
        assert stored == [m["data"] for m in everything]
        bad = client.get(f"/runs/{run_id}/events", headers={**STREAM, "Last-Event-ID": "three"})
        assert bad.status_code == 400
        assert (
            bad.json()["error"]["message"]
            == "Last-Event-ID must be an event seq number, not 'three'"
        )
        for huge in (
            "9" * 5000,
            "0" * 5000,
        ):  # past Python's 4300 digits for int(): a 400, not a 500
            assert (
                client.get(
                    f"/runs/{run_id}/events", headers={**STREAM, "Last-Event-ID": huge}
                ).status_code
                == 400
            )
            assert (
                client.get(f"/runs/{run_id}/events?after={huge}", headers=STREAM).status_code == 400
            )


def test_a_client_that_reconnects_misses_nothing(live: Live) -> None:
    with live.client() as client:
        run_id = client.post("/flows/slow/runs?wait=false", json={"inputs": {}}).json()["run_id"]
        with client.stream("GET", f"/runs/{run_id}/events", headers=STREAM) as response:
            first = read_sse(response, stop_after=2)  # then the connection drops mid-run
        assert [m["event"] for m in first] == ["run_started", "step_started"]
        with client.stream(
            "GET", f"/runs/{run_id}/events", headers={**STREAM, "Last-Event-ID": first[-1]["id"]}
        ) as response:
            second = read_sse(response)
        received = [m["data"] for m in first + second]
        assert [e["seq"] for e in received] == list(range(1, len(SLOW_TYPES) + 1))
        assert [e["type"] for e in received] == SLOW_TYPES
        stored = client.get(
            f"/runs/{run_id}/events", headers={"Accept": "application/json"}
        ).json()["events"]
        assert received == stored


def test_a_follower_of_a_queued_run_gets_all_of_it(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    # the first run holds the only slot long enough for the checks below even on a loaded machine
    hold = {
        "blocks/hold.yaml": "block: hold\nversion: 1\nkind: wait\nduration: 1500ms\n",
        "flows/hold.yaml": "flow: hold\nversion: 1\noutputs: []\nsteps:\n  - id: nap\n    uses: hold\n",
    }
    root = make_yard({**YARD, **hold, "blockyard.yaml": "server: {max_concurrent_runs: 1}\n"})
    live = serve(root, watch=False, schedules=False)
    with live.client() as client:
        first = client.post("/flows/hold/runs?wait=false", json={"inputs": {}}).json()
        second = client.post("/flows/slow/runs?wait=false", json={"inputs": {"a": 7}}).json()
        assert second["status"] == "queued"
        health = client.get("/healthz").json()
        assert (health["running"], health["queued"], health["max_concurrent_runs"]) == (1, 1, 1)
        queued = client.get(f"/runs/{second['run_id']}").json()
        assert queued["status"] == "queued"
        assert second["run_id"] in [
            r["id"] for r in client.get("/runs", params={"status": "queued"}).json()["runs"]
        ]
        with client.stream("GET", f"/runs/{second['run_id']}/events", headers=STREAM) as response:
            messages = read_sse(response)
        assert [m["event"] for m in messages] == SLOW_TYPES
        assert messages[-1]["data"]["data"]["outputs"] == {"total": 17}
        assert wait_run(client, first["run_id"])["status"] == "finished"


SLEEPY = """
block: sleepy
version: 1
kind: wait
duration: 1500ms
"""

SLEEPY_FLOW = """
flow: sleepy
version: 1
outputs: [total]
steps:
  - id: nap
    uses: sleepy
  - id: sum
    uses: adder
    with: {x: 1, y: 1}
"""


def test_runs_of_other_processes_are_followed_with_heartbeats(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard({**YARD, "blocks/sleepy.yaml": SLEEPY, "flows/sleepy.yaml": SLEEPY_FLOW})
    live = serve(root, watch=False, schedules=False, sse_ping=0.2)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = processes.Popen(
        [sys.executable, "-m", "engine", "run", "sleepy", "--json", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        started = json.loads(child.stdout.readline())  # the CLI prints run_started first
        run_id = started["run_id"]
        with live.client() as client:
            wait_for(lambda: client.get(f"/runs/{run_id}").status_code == 200)
            assert client.get(f"/runs/{run_id}").json()["status"] == "running"
            lines: list[str] = []
            with client.stream("GET", f"/runs/{run_id}/events", headers=STREAM) as response:
                lines.extend(response.iter_lines())
        assert any(line.startswith(":") for line in lines), (
            "no heartbeat while the other process worked"
        )
        events = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]
        assert [e["type"] for e in events] == SLOW_TYPES
        assert events[-1]["data"]["outputs"] == {"total": 2}
    finally:
        child.wait(timeout=30)
    assert child.returncode == 0
