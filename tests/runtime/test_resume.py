"""Failures are resumable: fix the cause, `blockyard resume RUN_ID`, and the run goes on from its
last checkpoint on the definition it started with — in another process, after kill -9 or Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from tests.runtime.conftest import Outcome, run_engine, spawn
from tests.support.state import state_db

Cli = Callable[..., Outcome]


def started_steps(events: list[dict[str, Any]]) -> list[str]:
    return [e["step"] for e in events if e["type"] == "step_started"]


def test_failed_tool_then_resume_after_the_fix(yard: Path, cli: Cli) -> None:
    failed = cli(yard, "run", "fragile", "--json")
    assert failed.code == 1
    last = failed.events()[-1]
    run_id = last["run_id"]
    assert (last["type"], last["step"], last["data"]["block"]) == ("run_failed", "boom", "explode")
    assert last["data"]["error"] == "tool 'explode' failed: RuntimeError: the fuse is lit"
    assert (
        f"run {run_id} failed at step 'boom' (block 'explode'): tool 'explode' failed" in failed.err
    )
    assert f"blockyard resume {run_id}" in failed.err

    listed = cli(yard, "runs")
    row = next(line for line in listed.out.splitlines() if line.startswith(run_id))
    assert "fragile@1" in row and "failed" in row and "step 'boom': tool 'explode' failed" in row

    shown = cli(yard, "runs", "show", run_id)
    assert "status    failed (step 'boom'" in shown.out
    assert "error     tool 'explode' failed: RuntimeError: the fuse is lit" in shown.out
    assert f"resume    blockyard resume {run_id}" in shown.out

    still = cli(yard, "resume", run_id, "--json")  # nothing fixed yet: fails again, same step
    assert still.code == 1 and still.events()[-1]["step"] == "boom"

    (yard / "fixed.flag").write_text("")
    done = cli(yard, "resume", run_id, "--json")
    assert done.code == 0, done.err
    events = done.events()
    assert events[0]["type"] == "run_started" and events[0]["data"]["resumed"] is True
    assert started_steps(events) == ["boom"]  # stamp finished before: not run again
    assert events[-1]["data"]["outputs"] == {"stamp": "v1", "echo": "v1!"}
    assert events[0]["seq"] > last["seq"]  # one sequence across executions

    body = json.loads(cli(yard, "runs", "show", run_id, "--json").out)
    steps = {s["step"]: s for s in body["steps"]}
    assert body["run"]["status"] == "finished" and body["run"]["error"] is None
    assert (steps["stamp"]["attempts"], steps["stamp"]["status"]) == (1, "finished")
    assert (steps["boom"]["attempts"], steps["boom"]["status"]) == (3, "finished")
    assert [e["seq"] for e in body["events"]] == list(range(1, len(body["events"]) + 1))
    assert cli(yard, "resume", run_id).code == 2  # finished: nothing to resume


def test_a_run_resumes_on_its_pinned_definition(yard: Path, cli: Cli) -> None:
    failed = cli(yard, "run", "fragile", "--json")
    run_id = failed.events()[-1]["run_id"]
    # the files change: a new flow version binds another text, the block computes another stamp
    (yard / "flows" / "fragile.yaml").write_text(
        textwrap.dedent("""
        flow: fragile
        version: 2
        outputs: [stamp, echo]
        steps:
          - {id: stamp, uses: stamp}
          - {id: boom, uses: explode, with: {text: "changed {{ context.stamp }}"}}
    """)
    )
    (yard / "blocks" / "stamp.yaml").write_text(
        (yard / "blocks" / "stamp.yaml").read_text().replace("'v1'", "'v2'")
    )
    shown = cli(yard, "runs", "show", run_id)
    assert "flow      fragile@1" in shown.out
    assert (
        "the files now define fragile@2" in shown.out
        and "stays on its pinned definition" in shown.out
    )
    assert (
        json.loads(cli(yard, "runs", "show", run_id, "--json").out)["definition"]["files"]
        == "differ"
    )

    (yard / "fixed.flag").write_text("")
    resumed = run_engine(yard, "resume", run_id, "--json")  # another process, same answer
    assert resumed.code == 0, resumed.err
    assert resumed.events()[-1]["data"]["outputs"] == {"stamp": "v1", "echo": "v1!"}
    fresh = cli(yard, "run", "fragile", "--json")  # a new run takes the files as they are now
    assert fresh.events()[-1]["data"]["outputs"] == {"stamp": "v2", "echo": "changed v2!"}
    assert "fragile@2" in cli(yard, "runs", "--flow", "fragile").out


def _read_until(stream: IO[str] | None, predicate: Callable[[str], bool]) -> list[str]:
    assert stream is not None  # spawned with a pipe
    seen = []
    for line in stream:
        seen.append(line)
        if predicate(line):
            return seen
    raise AssertionError(f"the process ended before the expected line; saw: {seen}")


def _committed(root: Path, run_id: str, step: str, timeout: float = 30.0) -> None:
    """Wait until the trace row of `step` starting is in the database (the writer commits in groups)."""
    deadline = time.monotonic() + timeout
    while True:
        with state_db(root) as conn:
            if conn.execute(
                "SELECT 1 FROM events WHERE run_id = ? AND type = 'step_started' AND step = ?",
                (run_id, step),
            ).fetchone():
                return
        assert time.monotonic() < deadline, (
            f"step {step!r} of run {run_id} never reached the database"
        )
        time.sleep(0.01)


def test_kill_9_mid_run_then_resume_in_another_process(yard: Path, cli: Cli) -> None:
    child = spawn(yard, "run", "crashy", "--input", "n=4", "--json")
    try:
        lines = _read_until(child.stdout, lambda line: '"step_started"' in line and '"nap"' in line)
        # the nap lasts 1 s: the kill lands inside it
        _committed(yard, json.loads(lines[0])["run_id"], "nap")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    before = [json.loads(line) for line in lines]
    run_id = before[0]["run_id"]
    assert started_steps(before) == ["first", "nap"]
    # the run went without LangGraph's loop (engine/runtime/direct_runs.py): no LangGraph checkpoint,
    # only the row of the step it finished, which is all its resume goes on from
    with state_db(yard) as conn:
        kept = [
            conn.execute(f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?", (run_id,)).fetchone()[
                0
            ]
            for table in ("checkpoints", "inline_steps")
        ]
    assert kept == [0, 1]

    listed = cli(yard, "runs")  # stored as running; its process is gone
    row = next(line for line in listed.out.splitlines() if line.startswith(run_id))
    assert "interrupted" in row and "process gone" in row
    assert run_id in cli(yard, "runs", "--status", "interrupted").out
    assert run_id not in cli(yard, "runs", "--status", "running").out

    done = run_engine(yard, "resume", run_id, "--json")
    assert done.code == 0, done.err
    after = done.events()
    assert started_steps(after) == ["nap", "last"]  # `first` finished before the crash: not re-run
    assert after[-1]["data"]["outputs"] == {"n": 5, "label": "small"}
    steps = {
        s["step"]: s for s in json.loads(cli(yard, "runs", "show", run_id, "--json").out)["steps"]
    }
    assert (steps["first"]["attempts"], steps["nap"]["attempts"], steps["last"]["attempts"]) == (
        1,
        2,
        1,
    )


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_kill_marks_the_run_interrupted_and_resumable(
    yard: Path, cli: Cli, sig: int, code: int
) -> None:
    child = spawn(yard, "run", "crashy")
    try:
        _read_until(child.stderr, lambda line: "nap: started" in line)
        child.send_signal(sig)
        _out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == code, err
    assert "interrupted: run " in err and "continue it with `blockyard resume " in err
    run_id = err.split("interrupted: run ", 1)[1].split()[0]
    body = json.loads(cli(yard, "runs", "show", run_id, "--json").out)
    assert (body["run"]["stored_status"], body["run"]["error_step"]) == ("interrupted", "nap")
    assert (
        body["events"][-1]["type"] == "run_failed"
        and body["events"][-1]["data"]["status"] == "interrupted"
    )
    done = cli(yard, "resume", run_id, "--json")
    assert done.code == 0, done.err
    assert started_steps(done.events()) == ["nap", "last"]
