"""The claim of a gate decision (engine/state/gates.py, `claim`) and its two guards, each on its own.

A decision claims its gate with a compare-and-swap (`UPDATE gates ... WHERE status = 'waiting'`,
then the row count) and the run with another (`UPDATE runs ... WHERE status = 'waiting'`, then the
row count), in one transaction. In a plain race the two hide each other — the loser's run is no
longer waiting either — so each is pinned here where only it can refuse:

- a gate decided already while its run still waits (at another gate): only the gate's check
  refuses; its refusal is the gate's own (`AlreadyDecided`, who decided and when);
- a gate still waiting while its run does not: only the run's check refuses (`NotWaiting`).

Either way nothing is written: no gate row changes, the run keeps its owner, no event is added.
Decisions are claimed through the state database's writer, on the backend of this pass."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import RunStatus
from engine.spec.decisions import AlreadyDecided, NotWaiting
from engine.state import gates, liveness, store
from engine.state.checkpointer import StateDB
from engine.state.database import Connection
from engine.state.location import locate
from engine.state.writer import Write

RUN = "run-1"
T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-01T00:01:00.000Z", "2026-01-01T00:02:00.000Z"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[StateDB]:
    # on Postgres in that pass (BLOCKYARD_DATABASE_URL)
    state = StateDB(locate(tmp_path / "state.db"))
    try:
        yield state
    finally:
        state.close()


def waiting_run(
    db: StateDB, *gate_names: str, status: RunStatus = RunStatus.WAITING
) -> dict[str, gates.Gate]:
    """A run with `status` and a waiting gate for each name (interrupt id `i-<name>`), as read before
    any decision: the gates a decider holds when it claims one."""
    record = store.RunRecord(RUN, "pay", 1, "digest", status, {}, created=T0, started=T0)
    db.writer.write_sync(
        store.save_definition("digest", "pay", 1, "{}", T0),
        store.insert_run(record),
        gates.record_waiting(
            RUN,
            {f"i-{name}": {"gate": name, "step": name, "message": "ok?"} for name in gate_names},
            T0,
        ),
    )

    def read(conn: Connection) -> dict[str, gates.Gate]:
        return {gate.gate: gate for gate in gates.of_run(conn, RUN)}

    held = db.read(read)
    assert sorted(held) == sorted(gate_names)
    return held


def claim(db: StateDB, gate: gates.Gate, actor: str, time: str, decision: str = "approve") -> Any:
    payload: dict[str, Any] = {
        "decision": decision,
        "values": {},
        "actor": actor,
        "reason": None,
        "time": time,
    }
    data = {"gate": gate.gate, "interrupt_id": gate.interrupt_id, **payload}
    return db.writer.call_sync(gates.claim(gate, payload, liveness.current(), data, time))


def snapshot(db: StateDB) -> tuple[Any, ...]:
    """Everything a claim writes: the gate rows, the run's status and owner, the events."""

    def read(conn: Any) -> tuple[Any, ...]:
        rows = tuple(gate.as_dict() for gate in gates.of_run(conn, RUN))
        run = conn.execute(
            "SELECT status, owner_pid, owner_host, finished FROM runs WHERE id = ?", (RUN,)
        ).fetchone()
        events = conn.execute(
            "SELECT seq, type, data FROM events WHERE run_id = ? ORDER BY seq", (RUN,)
        ).fetchall()
        return rows, tuple(run) if run is not None else None, tuple(tuple(e) for e in events)

    return db.read(read)


def test_a_claim_decides_the_gate_takes_the_run_and_records_the_event(db: StateDB) -> None:
    ask = waiting_run(db, "ask")["ask"]
    event = claim(db, ask, "ada", T1)
    assert (event.type, event.run_id, event.seq, event.step) == ("approval_decided", RUN, 1, "ask")
    rows, run, events = snapshot(db)
    assert [(r["status"], r["actor"], r["decided"]) for r in rows] == [("approved", "ada", T1)]
    assert run is not None and run[0] == "running"
    assert [(seq, kind) for seq, kind, _ in events] == [(1, "approval_decided")]


def test_the_loser_of_a_race_gets_the_gates_own_refusal(db: StateDB) -> None:
    """Both read the gate waiting; the second claim comes after the first one committed. Its refusal
    is the gate's, naming who decided and when — not that the run is running now (which it is)."""
    ask = waiting_run(db, "ask")["ask"]
    claim(db, ask, "ada", T1)
    before = snapshot(db)
    with pytest.raises(
        AlreadyDecided, match="gate 'ask' of run run-1 was already approved by ada"
    ) as refused:
        claim(db, ask, "grace", T2, "reject")
    assert type(refused.value) is AlreadyDecided
    assert str(refused.value) == f"gate 'ask' of run {RUN} was already approved by ada at {T1}"
    assert snapshot(db) == before


def test_the_gate_check_alone_refuses_a_decided_gate_while_the_run_waits_at_another(
    db: StateDB,
) -> None:
    """The run waits (at gate `b`), so its own check would let a claim through: the claim on `a`,
    decided already, is refused by the gate's compare-and-swap alone, and writes nothing."""
    held = waiting_run(db, "a", "b")
    claim(db, held["a"], "ada", T1)
    # the run went on and stopped again, waiting at `b`: `a` stays decided
    db.writer.write_sync(
        Write(
            "UPDATE runs SET status = ?, owner_pid = NULL, owner_host = NULL WHERE id = ?",
            (RunStatus.WAITING, RUN),
        )
    )
    before = snapshot(db)
    with pytest.raises(
        AlreadyDecided, match="gate 'a' of run run-1 was already approved by ada"
    ) as refused:
        claim(db, held["a"], "grace", T2, "reject")  # held since before ada's decision
    assert str(refused.value) == f"gate 'a' of run {RUN} was already approved by ada at {T1}"
    assert snapshot(db) == before
    claim(db, held["b"], "grace", T2)  # the gate the run does wait at is still there to decide


@pytest.mark.parametrize(
    "status",
    [
        RunStatus.RUNNING,
        RunStatus.FINISHED,
        RunStatus.FAILED,
        RunStatus.INTERRUPTED,
        RunStatus.QUEUED,
    ],
)
def test_the_run_check_alone_refuses_a_waiting_gate_of_a_run_that_no_longer_waits(
    db: StateDB, status: RunStatus
) -> None:
    """The gate is still waiting, so its own check would let a claim through: the run's
    compare-and-swap alone refuses it, and the gate's update before it is rolled back."""
    ask = waiting_run(db, "ask", status=status)["ask"]
    before = snapshot(db)
    with pytest.raises(
        NotWaiting, match=r"run run-1 is \w+, not waiting for an approval decision"
    ) as refused:
        claim(db, ask, "ada", T1)
    assert type(refused.value) is NotWaiting  # not the gate's refusal: the gate was not decided
    assert str(refused.value) == f"run {RUN} is {status}, not waiting for an approval decision"
    assert snapshot(db) == before
    rows, _, _ = before
    assert [r["status"] for r in rows] == ["waiting"]
