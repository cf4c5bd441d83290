"""Concurrent deciders (real processes), a decider killed mid-resume, a run paused on Monday that
resumes on Monday's definition after the files changed or vanished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import Yard
from engine.core.events import now_iso
from engine.state import gates, liveness, store
from engine.state.liveness import Owner
from tests.approvals.conftest import decided, paused, state
from tests.runtime.conftest import Outcome, spawn, subprocess_env
from tests.support import processes

Cli = Callable[..., Outcome]
CHILD = Path(__file__).with_name("decide_child.py")
DECIDERS = 4


def test_concurrent_decisions_exactly_one_wins(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "pay", "--json"))
    children = [
        processes.Popen(
            [sys.executable, str(CHILD), str(yard), run_id, name],
            env=subprocess_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ["ada", "grace", "ada", "grace"][:DECIDERS]
    ]
    for child in children:  # all of them imported and opened the database
        assert child.stdout is not None and child.stdout.readline() == "ready\n", (
            child.communicate()
        )
    for child in children:  # go: each is blocked reading its stdin, and all wake at once
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outcomes.append(json.loads(out))
    winners = [o for o in outcomes if o["ok"]]
    assert len(winners) == 1, outcomes
    assert winners[0]["status"] == "finished" and winners[0]["outputs"]["sum"] == 11
    for loser in (o for o in outcomes if not o["ok"]):
        # however late it comes, a loser is told who won: the gate's own refusal
        assert loser["error"].startswith(f"gate 'ask' of run {run_id} was already approved by"), (
            loser
        )
    assert len(decided(yard, run_id)) == 1
    with state(yard) as conn:
        starts = conn.execute(
            "SELECT COUNT(*) FROM events WHERE run_id = ? AND type = 'step_started' "
            "AND step = 'total'",
            (run_id,),
        ).fetchone()[0]
    assert starts == 1


def test_a_decider_killed_mid_run_is_resumed_without_a_new_decision(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "slowly", "--json"))
    child = spawn(yard, "resume", run_id, "--approve", "--json")
    assert child.stdout is not None
    for line in child.stdout:  # wait until the resumed run is inside its slow step
        if '"step_started"' in line and '"wait"' in line:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert cli(yard, "runs", "show", run_id).out.splitlines()[2].startswith("status    interrupted")
    refused = cli(yard, "resume", run_id, "--approve")
    assert (
        refused.code == 2 and "is interrupted, not waiting for an approval decision" in refused.err
    )
    done = cli(yard, "resume", run_id, "--json")
    assert done.code == 0, done.err
    assert [e["step"] for e in done.events() if e["type"] == "step_started"] == ["wait", "last"]
    assert len(decided(yard, run_id)) == 1


def test_a_claimed_decision_whose_process_died_is_handed_over_by_resume(yard: Path) -> None:
    """The decider claimed the gate and died before the graph took the decision."""
    with Yard.load(yard) as api:
        waiting = api.run("ends")
        (gate,) = api.gates(waiting.run_id)
        dead = Owner(pid=2**22 + 12345, host=liveness.host_name(), start="1")
        payload: dict[str, Any] = {
            "decision": "reject",
            "values": {},
            "actor": "ada",
            "reason": None,
            "time": "t",
            "timed_out": False,
        }
        api.db.writer.call_sync(
            gates.claim(gate, payload, dead, {"gate": "gate", **payload}, now_iso())
        )
        record = api.get_run(waiting.run_id)
        assert record is not None and store.effective_status(record) == "interrupted"
        result = api.resume(waiting.run_id)
        assert (result.status, result.outputs) == (
            "finished",
            {"n": 1},
        )  # the rejection took effect: no `second`


def test_gates_seen_by_a_process_that_died_wait_again(yard: Path, cli: Cli) -> None:
    """The run paused in its checkpoint but its process died before recording that it waits."""
    run_id, _ = paused(cli(yard, "run", "ends", "--json"))
    with state(yard) as conn:
        conn.execute("DELETE FROM gates WHERE run_id = ?", (run_id,))
        conn.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
    again = cli(yard, "resume", run_id, "--json")
    assert again.code == 3
    assert [e["type"] for e in again.events()] == ["run_started", "approval_required"]
    done = cli(yard, "resume", run_id, "--approve", "--json")
    assert done.code == 0 and done.events()[-1]["data"]["outputs"] == {"n": 2}


def test_resume_runs_the_pinned_definition_after_the_files_changed(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "ends", "--json"))
    flow = yard / "flows" / "ends.yaml"
    flow.write_text(
        flow.read_text()
        .replace(
            "  - id: second\n    uses: inc\n",
            "  - id: second\n    uses: inc\n  - id: third\n    uses: inc\n",
        )
        .replace("flow: ends\n", "flow: ends\nversion: 2\n")
    )
    shown = cli(yard, "runs", "show", run_id).out
    assert "flow      ends@1" in shown and "the files now define ends@2" in shown
    done = cli(yard, "resume", run_id, "--approve", "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == {"n": 2}  # Monday's definition: no `third`
    fresh = cli(yard, "run", "ends", "--json")
    assert paused(fresh)[0] != run_id


def test_resume_after_the_flow_and_its_block_were_deleted(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "guarded", "--json"))
    (yard / "flows" / "guarded.yaml").unlink()
    (yard / "blocks" / "inc.yaml").rename(yard / "blocks" / "increment.yaml.bak")
    assert "flow 'guarded' is no longer in the files" in cli(yard, "runs", "show", run_id).out
    done = cli(yard, "resume", run_id, "--approve", "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == {"n": 2}
