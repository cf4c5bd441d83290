"""Gates with a timeout: `blockyard gates --expire` (cron) and `Yard.expire_gates` (what serve
calls) decide them by `on_timeout` — approve with the defaults, reject, or go to a step."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine import Yard
from tests.approvals.conftest import decided, paused, state
from tests.runtime.conftest import Outcome

Cli = Callable[..., Outcome]


def _until(timeout_at: str) -> None:
    """Wait until a gate's timeout (10ms after it was created) has passed."""
    due = datetime.fromisoformat(timeout_at.replace("Z", "+00:00"))
    while (left := (due - datetime.now(UTC)).total_seconds()) >= 0:
        time.sleep(left + 0.001)


@pytest.mark.parametrize(
    ("mode", "gate", "action", "note"),
    [
        ("approve", "by_approve", "approve", "auto-approved"),
        ("reject", "by_reject", "reject", "rejected"),
        ("step", "by_step", "escalate", "escalated"),
    ],
)
def test_expire_decides_by_on_timeout(
    yard: Path, cli: Cli, mode: str, gate: str, action: str, note: str
) -> None:
    run_id, _ = paused(cli(yard, "run", "timed", "--input", f"mode={mode}", "--json"))
    with state(yard) as conn:
        created, timeout_at = conn.execute(
            "SELECT created, timeout_at FROM gates WHERE run_id = ?", (run_id,)
        ).fetchone()
    assert timeout_at is not None and timeout_at > created
    _until(timeout_at)
    expired = cli(yard, "gates", "--expire")
    assert expired.code == 0, expired.err
    assert (
        expired.out == f"run {run_id}: gate '{gate}' timed out -> {action}; the run is finished\n"
    )
    (decision,) = decided(yard, run_id)
    assert (decision["timed_out"], decision["actor"], decision["reason"]) == (
        True,
        None,
        "no decision within 10ms",
    )
    shown = json.loads(cli(yard, "runs", "show", run_id, "--json").out)
    assert shown["run"]["outputs"] == {"note": note}
    assert shown["decisions"][0]["status"] == "expired"
    assert cli(yard, "gates", "--expire").out == "no gate has timed out\n"


def test_gates_not_yet_due_are_left_alone_and_the_clock_is_injectable(yard: Path) -> None:
    with Yard.load(yard) as api:
        waiting = api.run("pay")  # no timeout: never expires
        timed = api.run("timed", {"mode": "reject"})
        (gate,) = api.gates(timed.run_id)
        due = datetime.fromisoformat(gate.timeout_at.replace("Z", "+00:00"))  # type: ignore[union-attr]
        assert api.expire_gates(now=due - timedelta(milliseconds=5)) == []
        (expired,) = api.expire_gates(now=due + timedelta(days=365))
        assert (expired.run_id, expired.gate, expired.action, expired.status) == (
            timed.run_id,
            "by_reject",
            "reject",
            "finished",
        )
        assert [g.run_id for g in api.gates()] == [waiting.run_id]
        assert api.get_run(waiting.run_id).status == "waiting"  # type: ignore[union-attr]


def test_serve_hook_counts_what_expired(yard: Path) -> None:
    import asyncio

    with Yard.load(yard) as api:
        api.run("timed", {"mode": "approve"})

        async def expire() -> int:
            return await api.aexpire_approvals(datetime.now(UTC) + timedelta(minutes=1))

        assert api._sync().call(expire) == 1
        assert asyncio.run(_none(api)) == 0


async def _none(api: Yard) -> int:
    return len(await api.aexpire_gates())


def test_a_gate_decided_by_a_person_first_does_not_expire(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "timed", "--input", "mode=step", "--json"))
    assert cli(yard, "resume", run_id, "--reject").code == 0
    with state(yard) as conn:
        (timeout_at,) = conn.execute(
            "SELECT timeout_at FROM gates WHERE run_id = ?", (run_id,)
        ).fetchone()
    _until(timeout_at)  # due, yet decided already
    assert cli(yard, "gates", "--expire", "--json").out.strip() == "[]"
    assert [d["decision"] for d in decided(yard, run_id)] == ["reject"]


def test_gates_listing(yard: Path, cli: Cli) -> None:
    assert cli(yard, "gates").out == "no gates waiting\n"
    run_id, _ = paused(cli(yard, "run", "timed", "--input", "mode=step", "--json"))
    listed = cli(yard, "gates")
    header, row = listed.out.splitlines()
    assert header.split() == ["RUN", "FLOW", "GATE", "WAITING", "SINCE", "TIMEOUT", "AT", "MESSAGE"]
    assert row.startswith(f"{run_id}  timed  by_step") and row.endswith("Escalate in time?")
    assert cli(yard, "gates", "--flow", "pay").out == "no gates waiting\n"
    (item,) = json.loads(cli(yard, "gates", "--json").out)
    assert (item["run_id"], item["gate"], item["status"], item["request"]["on_timeout"]) == (
        run_id,
        "by_step",
        "waiting",
        "escalate",
    )
