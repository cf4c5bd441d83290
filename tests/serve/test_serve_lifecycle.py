"""Runs across reloads, shutdowns, crashes and restarts: pinned versions, graceful drain, recovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.serve.serve_helpers import (
    GATED_FLOW,
    PAUSE,
    YARD,
    Live,
    start_gated_run,
    wait_for,
    wait_run,
)
from tests.support import processes
from tests.support.state import state_db


def stored_status(root: Path, run_id: str) -> str:
    with state_db(root) as conn:
        return str(conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0])


def test_runs_finish_on_the_version_they_started_with(
    yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(yard, schedules=False)
    with live.client() as client:
        old = client.post("/flows/slow/runs?wait=false", json={"inputs": {"a": 1}}).json()
        assert old["version"] == 1
        (yard / "flows/slow.yaml").write_text(
            YARD["flows/slow.yaml"].replace("version: 1", "version: 2").replace("y: 10", "y: 20")
        )
        wait_for(lambda: client.get("/flows/slow").json()["version"] == 2)
        new = client.post("/flows/slow/runs", json={"inputs": {"a": 1}}).json()
        assert (new["version"], new["outputs"]) == (2, {"total": 21})
        finished = wait_run(client, old["run_id"])
        assert (finished["version"], finished["outputs"]) == (1, {"total": 11})
        assert finished["digest"] != client.get(f"/runs/{new['run_id']}").json()["digest"]


def test_a_broken_edit_keeps_serving_the_last_good_version(
    yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(yard, schedules=False)
    with live.client() as client:
        (yard / "flows/add.yaml").write_text(
            YARD["flows/add.yaml"]
            .replace("version: 1", "version: 2")
            .replace("uses: adder", "uses: addr")
        )
        report = wait_for(lambda: (r := client.get("/diagnostics").json())["stale"] and r)
        assert report["ok"] is False
        assert report["stale"]["add"]["serving_version"] == 1
        assert any(d["file"] == "flows/add.yaml" for d in report["diagnostics"])
        flows = {f["name"]: f for f in client.get("/flows").json()["flows"]}
        assert flows["add"]["stale"] is True and flows["add"]["version"] == 1
        assert flows["add"]["problems"] and flows["slow"]["stale"] is False
        result = client.post("/flows/add/runs", json={"inputs": {"a": 1}}).json()
        assert (result["status"], result["version"], result["outputs"]) == (
            "finished",
            1,
            {"total": 3},
        )
        (yard / "flows/add.yaml").write_text(
            YARD["flows/add.yaml"].replace("version: 1", "version: 2")
        )
        wait_for(lambda: client.get("/diagnostics").json()["ok"])
        assert client.get("/flows/add").json()["version"] == 2


def test_shutdown_lets_running_runs_finish(yard: Path, serve: Callable[..., Live]) -> None:
    live = serve(yard, watch=False, schedules=False, grace=30.0)
    with live.client() as client:
        run_id = client.post("/flows/slow/runs?wait=false", json={"inputs": {}}).json()["run_id"]
        wait_for(lambda: client.get(f"/runs/{run_id}").json()["status"] == "running")
    live.stop()
    assert stored_status(yard, run_id) == "finished"


def test_shutdown_interrupts_what_outlives_the_grace_and_a_restart_resumes_it(
    yard: Path, serve: Callable[..., Live]
) -> None:
    # a nap the stop lands in on a busy machine too (300 ms was over before the server stopped, once in
    # a few hundred runs); the resumed run naps again (a wait step restarts its timer)
    (yard / "blocks/pause.yaml").write_text(PAUSE.replace("300ms", "2s"))
    live = serve(yard, watch=False, schedules=False, grace=0.0)
    with live.client() as client:
        run_id = client.post("/flows/slow/runs?wait=false", json={"inputs": {"a": 4}}).json()[
            "run_id"
        ]
        wait_for(lambda: client.get(f"/runs/{run_id}").json()["status"] == "running")
    live.stop()
    assert stored_status(yard, run_id) == "interrupted"
    again = serve(yard, watch=False, schedules=False)
    with again.client() as client:
        assert client.get(f"/runs/{run_id}").json()["status"] == "interrupted"
        result = client.post(f"/runs/{run_id}/resume", json={}).json()
        assert (result["status"], result["outputs"], result["version"]) == (
            "finished",
            {"total": 14},
            1,
        )
        trace = client.get(f"/runs/{run_id}/events", headers={"Accept": "application/json"}).json()[
            "events"
        ]
        starts = [e for e in trace if e["type"] == "run_started"]
        assert len(starts) == 2 and starts[1]["data"].get("resumed") is True
        assert [e["seq"] for e in trace] == list(range(1, len(trace) + 1))


SLEEPY = """
block: sleepy
version: 1
kind: wait
duration: 30s
"""

SLEEPY_FLOW = """
flow: sleepy
version: 1
outputs: [total]
steps:
  - id: first
    uses: adder
    with: {x: 2, y: 3}
  - id: nap
    uses: sleepy
  - id: sum
    uses: adder
    with: {x: "{{ context.total }}", y: 1}
"""


def test_runs_left_running_by_a_crash_are_interrupted_at_start_and_resumable(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard({**YARD, "blocks/sleepy.yaml": SLEEPY, "flows/sleepy.yaml": SLEEPY_FLOW})
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = processes.Popen(
        [sys.executable, "-m", "engine", "run", "sleepy", "--json", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    run_id = ""
    for line in child.stdout:  # wait until the first step is done and the nap has begun
        event = json.loads(line)
        run_id = event["run_id"]
        if event["type"] == "step_started" and event["step"] == "nap":
            break
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert stored_status(root, run_id) == "running"  # nobody recorded the crash

    # a fix lands before restart
    (root / "blocks/sleepy.yaml").write_text(SLEEPY.replace("30s", "10ms"))
    live = serve(root, watch=False, schedules=False, grace=0.2)
    assert stored_status(root, run_id) == "interrupted"
    with live.client() as client:
        assert client.get(f"/runs/{run_id}").json()["status"] == "interrupted"
        assert run_id in [
            r["id"] for r in client.get("/runs", params={"status": "interrupted"}).json()["runs"]
        ]
        # the pinned definition still waits 30 s: resume in the background and check it is running on it
        accepted = client.post(f"/runs/{run_id}/resume?wait=false", json={})
        assert accepted.status_code == 202
        busy = client.post(f"/runs/{run_id}/resume", json={})
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "run_busy")
        trace = wait_for(
            lambda: (
                len(
                    events := client.get(
                        f"/runs/{run_id}/events", headers={"Accept": "application/json"}
                    ).json()["events"]
                )
                and events[-1]["type"] == "step_started"
                and events
            )
        )
        assert trace[-1]["step"] == "nap"
        finished_steps = [e["step"] for e in trace if e["type"] == "step_finished"]
        assert finished_steps == ["first"]  # the finished step was not run again


def test_a_paused_run_survives_a_reload_and_a_restart(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard({**YARD, "flows/gated.yaml": GATED_FLOW})
    live = serve(root, schedules=False)
    with live.client() as client:
        paused = start_gated_run(client, {"a": 1})
        run_id = paused["run_id"]
        assert paused["waiting"] and paused["step"] == "ask"
        run = client.get(f"/runs/{run_id}").json()
        assert run["status"] == "waiting" and run["gates"][0]["step"] == "ask"
        assert run_id in [
            r["id"] for r in client.get("/runs", params={"status": "waiting"}).json()["runs"]
        ]
        # a new version that adds 100 more: the paused run must not see it
        (root / "flows/gated.yaml").write_text(
            GATED_FLOW.replace("version: 1", "version: 2").replace(
                'y: "{{ context.b }}"', 'y: "{{ context.b + 100 }}"'
            )
        )
        wait_for(lambda: client.get("/flows/gated").json()["version"] == 2)
        not_yet = client.post(f"/runs/{run_id}/resume", json={})
        assert (not_yet.status_code, not_yet.json()["error"]["code"]) == (409, "decision_needed")
    live.stop()
    again = serve(root, schedules=False)
    with again.client() as client:
        assert client.get(f"/runs/{run_id}").json()["status"] == "waiting"
        result = client.post(
            f"/runs/{run_id}/resume", json={"approve": True, "values": {"b": 41}, "reason": "fine"}
        ).json()
        assert (result["status"], result["version"], result["outputs"]) == (
            "finished",
            1,
            {"total": 42},
        )
        fresh = client.post("/flows/gated/runs", json={"inputs": {"a": 1}}).json()
        assert fresh["version"] == 2
