"""Our tables: migrations, run records, events, the ownership claim; run ids; process liveness."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.core.errors import UsageError
from engine.core.events import Event, RunStatus, Sequencer, now_iso, parse_time
from engine.state import liveness, migrations, store
from engine.state.checkpointer import StateDB
from engine.state.database import StateError
from engine.state.ids import check_run_id, new_run_id
from engine.state.store import RunRecord


def record(run_id: str = "r1", **changes: object) -> RunRecord:
    me = liveness.current()
    base = dict(
        id=run_id,
        flow="hello",
        version=1,
        digest="d1",
        status="running",
        inputs={"name": "Ada"},
        owner_pid=me.pid,
        owner_host=me.host,
        owner_start=me.start,
        created=now_iso(),
        started=now_iso(),
    )
    base.update(changes)
    return RunRecord(**base)  # type: ignore[arg-type]


def test_migrations_are_idempotent_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    StateDB(path).close()
    StateDB(path).close()
    conn = store.open_existing(path)
    assert conn is not None
    versions = conn.execute("SELECT version FROM blockyard_migrations").fetchall()
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert versions == [(version,) for version, _ in migrations.MIGRATIONS]
    assert {"runs", "events", "definitions", "gates", "threads", "checkpoints", "writes"} <= tables
    conn.execute(
        "INSERT INTO blockyard_migrations VALUES (?, ?)", (migrations.SCHEMA_VERSION + 1, now_iso())
    )
    conn.close()
    with pytest.raises(StateError, match="newer than this blockyard"):
        store.open_existing(path)


def test_missing_database_means_no_runs(tmp_path: Path) -> None:
    assert store.open_existing(tmp_path / "none.db") is None


def test_run_roundtrip_end_and_events(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "s.db")
    try:
        db.writer.write_sync(
            store.save_definition("d1", "hello", 1, '{"flow": {}}', now_iso()),
            store.insert_run(record()),
        )
        seq = Sequencer("r1")
        events = [
            seq.make("run_started", data={"flow": "hello"}),
            seq.make("step_started", "greet"),
        ]
        db.writer.write_sync(store.insert_events(events))
        db.writer.write_sync(
            store.end_run(
                "r1",
                RunStatus.FINISHED,
                outputs={"loud": "HI"},
                error=None,
                error_step=None,
                finished=now_iso(),
                elapsed=0.25,
            )
        )
        db.writer.write_sync(
            store.end_run(
                "r1",
                RunStatus.FINISHED,
                outputs={"loud": "HI"},
                error=None,
                error_step=None,
                finished=now_iso(),
                elapsed=0.5,
            )
        )
        run = db.read(lambda conn: store.get_run(conn, "r1"))
        assert run is not None
        assert (run.status, run.outputs, run.inputs) == (
            "finished",
            {"loud": "HI"},
            {"name": "Ada"},
        )
        assert run.duration == 0.75  # each execution adds its time
        assert db.read(lambda conn: store.load_events(conn, "r1")) == events
        assert db.read(lambda conn: store.last_seq(conn, "r1")) == 2
        assert db.read(lambda conn: store.load_definition(conn, "d1")) == '{"flow": {}}'
    finally:
        db.close()


def test_list_runs_filters_newest_first(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "s.db")
    try:
        db.writer.write_sync(store.save_definition("d1", "hello", 1, "{}", now_iso()))
        for run_id, flow, status in [
            ("a1", "hello", "finished"),
            ("a2", "other", "failed"),
            ("a3", "hello", "failed"),
        ]:
            db.writer.write_sync(store.insert_run(record(run_id, flow=flow, status=status)))
        ids = db.read(lambda conn: [r.id for r in store.list_runs(conn)])
        failed_hello = db.read(
            lambda conn: [r.id for r in store.list_runs(conn, flow="hello", statuses=["failed"])]
        )
        assert ids == ["a3", "a2", "a1"]
        assert failed_hello == ["a3"]
    finally:
        db.close()


def test_claim_is_a_compare_and_swap(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "s.db")
    try:
        db.writer.write_sync(
            store.save_definition("d1", "hello", 1, "{}", now_iso()),
            store.insert_run(
                record(status="failed", owner_pid=1, owner_host="h", owner_start=None)
            ),
        )
        seen = db.read(lambda conn: store.get_run(conn, "r1"))
        assert seen is not None
        assert db.writer.call_sync(store.claim("r1", seen, 42, "me", "7")) is True
        # the first claim won
        assert db.writer.call_sync(store.claim("r1", seen, 43, "you", "8")) is False
        now = db.read(lambda conn: store.get_run(conn, "r1"))
        assert now is not None and (now.status, now.owner_pid, now.owner_host) == (
            "running",
            42,
            "me",
        )
    finally:
        db.close()


def test_run_ids_are_short_unique_and_time_ordered() -> None:
    first = new_run_id()
    time.sleep(0.002)
    later = [new_run_id() for _ in range(5000)]  # many share a millisecond
    assert len(first) == 14 and first.isalnum() and first.islower()
    assert len(set(later)) == len(later)
    assert later == sorted(later) and first < later[0]


@pytest.mark.parametrize("bad", ["", "-x", "a b", "x" * 65, "a/b", "../up", "ok\n"])
def test_user_run_ids_are_checked(bad: str) -> None:
    with pytest.raises(UsageError, match="invalid run id"):
        check_run_id(bad)


def test_liveness_of_owners() -> None:
    me = liveness.current()
    assert liveness.is_alive(me.pid, me.host, me.start)
    assert not liveness.is_alive(None, me.host, None)
    assert liveness.is_alive(12345, "another-host", None)  # cannot tell: presumed alive
    if me.start is not None:  # the same pid with another start time is another process
        assert not liveness.is_alive(me.pid, me.host, str(int(me.start) + 1))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while True:  # exited but not reaped: a zombie is not alive
        try:
            stat = Path(f"/proc/{child.pid}/stat").read_text()
        except OSError:
            break
        if stat.rpartition(")")[2].split()[0] == "Z":
            break
        time.sleep(0.01)
    assert not liveness.is_alive(child.pid, me.host, None)
    child.wait()
    assert not liveness.is_alive(child.pid, me.host, None)


def test_effective_status_shows_dead_owners_as_interrupted() -> None:
    assert store.effective_status(record()) == "running"
    gone = record(owner_pid=2**22 + 17, owner_start=None)  # beyond Linux's largest pid_max
    assert store.effective_status(gone) == "interrupted"
    assert store.effective_status(record(status="failed", owner_pid=None)) == "failed"


def test_events_serialize_one_schema() -> None:
    seq = Sequencer("r9", last=4)
    event = seq.make("step_finished", "greet", {"duration_ms": 1.5})
    assert event.seq == 5
    assert Event.from_dict(event.as_dict()) == event
    assert list(event.as_dict()) == ["type", "run_id", "seq", "step", "time", "data"]
    assert event.time.endswith("Z") and parse_time(event.time).tzinfo is not None
    assert seq.from_custom({"type": "not_ours"}) is None
    warning = seq.from_custom({"type": "warning", "step": "loop", "data": {"message": "m"}})
    assert warning is not None and warning.data == {"message": "m"}


def test_sqlite_errors_are_not_swallowed(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "s.db")
    try:
        db.writer.write_sync(
            store.save_definition("d1", "hello", 1, "{}", now_iso()), store.insert_run(record())
        )
        with pytest.raises(sqlite3.IntegrityError, match=r"UNIQUE constraint failed: runs.id"):
            db.writer.write_sync(store.insert_run(record()))
    finally:
        db.close()
