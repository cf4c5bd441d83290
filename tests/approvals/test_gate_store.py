"""The `gates` table as a run and its deciders see it (engine/state/gates.py): the rows a stopped execution
leaves, each gate's clock, what a decision writes (the gate, the run's new owner, the event) and what
`blockyard gates` and the timeout sweep read back — on a real state database (SQLite, or Postgres in that
pass). The claim's two refusals are test_gate_claim_guards.py's."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import RunStatus
from engine.spec.decisions import NotWaiting
from engine.state import gates, liveness, store
from engine.state.checkpointer import StateDB
from engine.state.location import locate
from engine.state.writer import Write

RUN, OTHER_RUN = "run-1", "run-2"
T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-01T00:01:00.000Z"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[StateDB]:
    state = StateDB(locate(tmp_path / "state.db"))
    try:
        for run_id, flow in ((RUN, "pay"), (OTHER_RUN, "lunch")):
            record = store.RunRecord(
                run_id,
                flow,
                1,
                "digest",
                RunStatus.WAITING,
                {},
                created=T0,
                started=T0,
                error="stopped",
                error_step="ask",
                finished=T0,
            )
            state.writer.write_sync(
                store.save_definition("digest", flow, 1, "{}", T0), store.insert_run(record)
            )
        yield state
    finally:
        state.close()


def rows(db: StateDB, run_id: str = RUN) -> list[gates.Gate]:
    return db.read(lambda conn: gates.of_run(conn, run_id))


def test_a_stopped_execution_leaves_one_waiting_row_per_gate_named_as_people_name_it(
    db: StateDB,
) -> None:
    db.writer.write_sync(
        gates.record_waiting(
            RUN,
            {
                "i-1": {
                    "gate": "ask[2]",
                    "step": "ask",
                    "message": "Pay?",
                    "fields": {"tip": {"type": "integer"}},
                    "flow": "pay",
                },
                "i-2": {"step": "confirm"},  # no gate name: the step's
                "i-3": {"message": "bare"},  # neither: '?'
                "i-4": "a plain interrupt value",  # not a gate's request: its text is the message
            },
            T0,
        )
    )
    found = {gate.interrupt_id: gate for gate in rows(db)}
    assert [
        (g.gate, g.step, g.status, g.created, g.timeout_at, g.decided, g.actor, g.decision)
        for g in (found["i-1"], found["i-2"], found["i-3"], found["i-4"])
    ] == [
        ("ask[2]", "ask", "waiting", T0, None, None, None, None),
        ("confirm", "confirm", "waiting", T0, None, None, None, None),
        ("?", "?", "waiting", T0, None, None, None, None),
        ("?", "?", "waiting", T0, None, None, None, None),
    ]
    assert (found["i-1"].message, found["i-1"].fields, found["i-1"].flow) == (
        "Pay?",
        {"tip": {"type": "integer"}},
        "pay",
    )
    assert (found["i-2"].message, found["i-2"].fields, found["i-2"].flow) == ("", {}, "")
    assert found["i-4"].request == {"message": "a plain interrupt value"}
    assert found["i-1"].as_dict() == {
        "run_id": RUN,
        "interrupt_id": "i-1",
        "gate": "ask[2]",
        "step": "ask",
        "status": "waiting",
        "request": found["i-1"].request,
        "created": T0,
        "timeout_at": None,
        "decided": None,
        "actor": None,
        "decision": None,
    }


def test_a_gate_seen_again_keeps_its_row_and_its_clock(db: StateDB) -> None:
    db.writer.write_sync(
        gates.record_waiting(RUN, {"i-1": {"gate": "ask", "message": "first", "timeout": "1h"}}, T0)
    )
    db.writer.write_sync(
        gates.record_waiting(RUN, {"i-1": {"gate": "ask", "message": "again", "timeout": "1h"}}, T1)
    )
    [gate] = rows(db)
    assert (gate.message, gate.created, gate.timeout_at) == (
        "first",
        T0,
        "2026-01-01T01:00:00.000Z",
    )


@pytest.mark.parametrize(
    ("timeout", "due"),
    [
        ("90s", "2026-01-01T00:01:30.000Z"),
        ("1.5s", "2026-01-01T00:00:01.500Z"),
        ("2d", "2026-01-03T00:00:00.000Z"),
        (None, None),
        ("", None),
        (0, None),
    ],
)
def test_a_gates_deadline_is_its_timeout_after_it_was_reached(
    db: StateDB, timeout: Any, due: str | None
) -> None:
    db.writer.write_sync(
        gates.record_waiting(RUN, {"i-1": {"gate": "ask", "timeout": timeout}}, T0)
    )
    assert rows(db)[0].timeout_at == due


def test_a_deadline_past_the_last_representable_day_is_none(db: StateDB) -> None:
    late = "9999-12-31T00:00:00.000Z"  # a pinned timeout of years from here overflows the calendar
    db.writer.write_sync(
        gates.record_waiting(RUN, {"i-1": {"gate": "ask", "timeout": "30d"}}, late)
    )
    assert rows(db)[0].timeout_at is None


def test_times_are_written_in_utc_with_milliseconds() -> None:
    moment = datetime(2026, 1, 1, 3, 4, 5, 678999, tzinfo=timezone(timedelta(hours=2)))
    assert gates.iso(moment) == "2026-01-01T01:04:05.678Z"
    assert gates.iso(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00.000Z"


def test_times_are_written_in_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    # a process running 5.5 hours east of UTC (POSIX TZ: no tzdata needed)
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    try:
        assert (
            gates.iso(datetime(2026, 1, 1, 5, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))))
            == "2026-01-01T00:00:00.000Z"
        )
        assert gates.iso(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00.000Z"
    finally:
        monkeypatch.undo()
        time.tzset()


def claim(db: StateDB, gate: gates.Gate, payload: dict[str, Any], owner: liveness.Owner) -> Any:
    data = {"gate": gate.gate, "interrupt_id": gate.interrupt_id, **payload}
    return db.writer.call_sync(gates.claim(gate, payload, owner, data, T1))


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"decision": "approve", "actor": "ada"}, "approved"),
        ({"decision": "reject", "actor": "ada"}, "rejected"),
        ({"decision": "approve", "actor": None, "timed_out": True}, "expired"),
    ],
)
def test_a_decision_writes_the_gate_the_runs_new_owner_and_the_event_in_one_go(
    db: StateDB, payload: dict[str, Any], status: str
) -> None:
    db.writer.write_sync(
        gates.record_waiting(RUN, {"i-1": {"gate": "ask", "step": "ask"}}, T0),
        Write(
            "INSERT INTO events (run_id, seq, type, step, time, data) VALUES (?, 1, 'run_started', "
            "NULL, ?, '{}'), (?, 2, 'approval_requested', 'ask', ?, '{}')",
            (RUN, T0, RUN, T0),
        ),
    )
    [gate] = rows(db)
    owner = liveness.Owner(4242, "host-b", "777", "replica-b", 1234.5)
    event = claim(db, gate, payload, owner)
    assert (event.type, event.run_id, event.seq, event.step, event.time) == (
        "approval_decided",
        RUN,
        3,
        "ask",
        T1,
    )
    [decided] = rows(db)
    assert (decided.status, decided.decided, decided.actor, decided.decision) == (
        status,
        T1,
        payload["actor"],
        payload,
    )
    run = db.read(lambda conn: store.get_run(conn, RUN))
    assert run is not None
    assert (
        run.status,
        run.owner_pid,
        run.owner_host,
        run.owner_start,
        run.owner_replica,
        run.lease_until,
        run.error,
        run.error_step,
        run.finished,
    ) == ("running", 4242, "host-b", "777", "replica-b", 1234.5, None, None, None)
    stored = db.read(
        lambda conn: conn.execute(
            "SELECT seq, type, step, time, data FROM events WHERE run_id = ? AND seq = 3", (RUN,)
        ).fetchone()
    )
    assert tuple(stored[:4]) == (3, "approval_decided", "ask", T1)
    assert json.loads(stored[4]) == {"gate": "ask", "interrupt_id": "i-1", **payload}
    assert [g.status for g in rows(db, OTHER_RUN)] == []  # another run: untouched


def test_a_decision_on_a_run_that_is_gone_says_so(db: StateDB) -> None:
    db.writer.write_sync(
        gates.record_waiting(RUN, {"i-1": {"gate": "ask"}}, T0),
        Write("DELETE FROM runs WHERE id = ?", (RUN,)),
    )
    [gate] = rows(db)
    with pytest.raises(
        NotWaiting, match=r"^run run-1 is gone, not waiting for an approval decision$"
    ):
        claim(db, gate, {"decision": "approve", "actor": "ada"}, liveness.current())
    assert rows(db)[0].status == "waiting"


def test_the_refusal_names_who_decided_and_when_as_far_as_known() -> None:
    def gate(**fields: Any) -> gates.Gate:
        return gates.Gate(RUN, "i-1", "ask", "ask", gates.GateStatus.EXPIRED, {}, T0, **fields)

    assert gates.already_decided(gate()) == "gate 'ask' of run run-1 was already expired"
    assert (
        gates.already_decided(gate(actor="ada"))
        == "gate 'ask' of run run-1 was already expired by ada"
    )
    assert (
        gates.already_decided(gate(decided=T1))
        == f"gate 'ask' of run run-1 was already expired at {T1}"
    )


def test_what_waits_and_what_is_due(db: StateDB) -> None:
    db.writer.write_sync(
        gates.record_waiting(
            RUN,
            {
                "i-b": {"gate": "b", "flow": "pay", "timeout": "2m"},
                "i-a": {"gate": "a", "flow": "pay", "timeout": "1m"},
            },
            T0,
        ),
        gates.record_waiting(
            OTHER_RUN,
            {
                "i-c": {"gate": "c", "flow": "lunch", "timeout": "30s"},
                "i-d": {"gate": "d", "flow": "lunch"},
            },
            T0,
        ),
        gates.record_waiting(RUN, {"i-e": {"gate": "e", "flow": "pay", "timeout": "10s"}}, T1),
    )
    assert [g.gate for g in rows(db)] == ["a", "b", "e"]  # as reached: by time, then name
    assert db.read(lambda conn: gates.get(conn, RUN, "i-nope")) is None
    assert db.read(lambda conn: gates.get(conn, OTHER_RUN, "i-c")).gate == "c"  # type: ignore[union-attr]
    assert [g.gate for g in db.read(lambda conn: gates.waiting(conn))] == ["a", "b", "c", "d", "e"]
    assert [g.gate for g in db.read(lambda conn: gates.waiting(conn, flow="lunch"))] == ["c", "d"]
    assert [g.gate for g in db.read(lambda conn: gates.due(conn, "2026-01-01T00:01:00.000Z"))] == [
        "c",
        "a",
    ]
    assert [g.gate for g in db.read(lambda conn: gates.due(conn, "2026-01-01T00:00:29.999Z"))] == []
    assert [g.gate for g in db.read(lambda conn: gates.due(conn, "2026-01-01T00:05:00.000Z"))] == [
        "c",
        "a",
        "e",
        "b",
    ]  # by deadline: 00:00:30, 00:01:00, 00:01:10, 00:02:00
    decided = db.read(lambda conn: gates.get(conn, OTHER_RUN, "i-c"))
    assert decided is not None
    claim(db, decided, {"decision": "approve", "actor": "ada"}, liveness.current())
    assert [g.gate for g in db.read(lambda conn: gates.due(conn, "2026-01-01T00:05:00.000Z"))] == [
        "a",
        "e",
        "b",
    ]
    assert [g.gate for g in db.read(lambda conn: gates.waiting(conn))] == ["a", "b", "d", "e"]
