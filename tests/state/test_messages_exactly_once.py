"""A finished turn adds exactly two rows to `messages` (its message and its reply), however often it
is recorded: again by a retry of the same writer, by another writer (a replica that took the run
over), or by two writers at the same moment (engine/state/messages.py, `append_turn`).

Two guards keep the second copy out, and each is pinned here on its own: the statement's `WHERE NOT
EXISTS` (a turn already recorded adds nothing), and the unique index `messages_run` on (run_id,
role), which with `INSERT OR IGNORE` (Postgres: `ON CONFLICT DO NOTHING`) turns a copy that raced
past NOT EXISTS into a no-op rather than a second row or an error for its writer. On every backend
of the suite's passes (SQLite, Postgres).

In a race the index is not alone: both writers number the turn after the same committed last row,
so their rows collide on the thread's primary key (thread_id, idx) too, which INSERT OR IGNORE
ignores just as well. That is why the index is pinned by the schema it must have
(`test_the_unique_index_is_there_on_run_and_role`), and NOT EXISTS by a retry on a table without
the index (`test_not_exists_alone_keeps_a_retry_out`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.state import messages
from engine.state.checkpointer import StateDB
from engine.state.database import Connection
from engine.state.location import Location, locate
from engine.state.writer import Write

THREAD, RUN, OTHER = "thread-1", "run-1", "run-2"
NOW = "2026-01-01T00:00:00.000Z"


@pytest.fixture
def location(tmp_path: Path) -> Location:
    # this pass's backend: Postgres through BLOCKYARD_DATABASE_URL
    return locate(tmp_path / "state.db")


@pytest.fixture
def db(location: Location) -> Iterator[StateDB]:
    state = StateDB(location)  # creates and migrates the tables
    try:
        yield state
    finally:
        state.close()


def turn(run_id: str = RUN, said: str = "hello", reply: str = "hi there") -> Write:
    return messages.append_turn(THREAD, run_id, said, reply, NOW)


def stored(db: StateDB) -> list[tuple[int, str, str, str]]:
    return [
        (m.index, m.role, m.content, m.run_id)
        for m in db.read(lambda conn: messages.history(conn, THREAD))
    ]


TWO = [(0, "user", "hello", RUN), (1, "assistant", "hi there", RUN)]


def drop_index(db: StateDB) -> None:
    db.writer.write_sync(Write("DROP INDEX messages_run"))


def test_a_turn_recorded_again_by_a_retry_is_stored_once(db: StateDB) -> None:
    db.writer.write_sync(turn())
    db.writer.write_sync(turn())  # the same run's rows again: its end was retried
    assert stored(db) == TWO
    db.writer.write_sync(turn(OTHER, "more", "sure"))  # the next turn follows right after
    assert stored(db)[2:] == [(2, "user", "more", OTHER), (3, "assistant", "sure", OTHER)]
    db.writer.write_sync(turn())  # and a late retry of the first adds nothing after it either
    assert len(stored(db)) == 4


def test_a_turn_recorded_again_by_another_writer_is_stored_once(
    db: StateDB, location: Location
) -> None:
    """A replica that took the run over records its turn too, through its own connection."""
    db.writer.write_sync(turn())
    other = StateDB(location)
    try:
        other.writer.write_sync(turn(reply="hi there, again"))  # its own execution's reply
    finally:
        other.close()
    assert stored(db) == TWO
    assert db.read(lambda conn: messages.count(conn, THREAD)) == 2


def test_the_unique_index_is_there_on_run_and_role(db: StateDB) -> None:
    """What keeps a racing second copy out (below), on a database as the migrations leave it."""

    def unique_indexes(conn: Connection) -> dict[str, tuple[str, ...]]:
        if db.location.url is None:
            names = [row[1] for row in conn.execute("PRAGMA index_list(messages)") if row[2]]
            return {
                name: tuple(row[2] for row in conn.execute(f"PRAGMA index_info({name})"))
                for name in names
            }
        rows = conn.execute(
            "SELECT i.relname, a.attname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class t ON t.oid = x.indrelid JOIN pg_attribute a ON a.attrelid = t.oid "
            "AND a.attnum = ANY(x.indkey) WHERE t.relname = 'messages' AND x.indisunique "
            "ORDER BY i.relname, array_position(x.indkey::int2[], a.attnum)"
        ).fetchall()
        found: dict[str, tuple[str, ...]] = {}
        for name, column in rows:
            found[name] = (*found.get(name, ()), column)
        return found

    assert unique_indexes(db.read_conn).get("messages_run") == ("run_id", "role")


def test_not_exists_alone_keeps_a_retry_out(db: StateDB) -> None:
    """Without the unique index (so only the statement's own guard is left), a turn recorded again
    still adds nothing: the first guard does not lean on the second."""
    drop_index(db)
    db.writer.write_sync(turn())
    db.writer.write_sync(turn())
    assert stored(db) == TWO


def raw_connection(location: Location) -> Any:
    """A connection of its own (explicit transactions), as another process would have."""
    if location.url is None:
        from engine.state.database import open_database

        return open_database(location.path)
    from engine.state.postgres import connect

    return connect(location.url)


def blocked_or_done(location: Location, conn: Any, done: threading.Event) -> None:
    """Wait until the second writer's statement waits for the first one's lock, or is done."""
    if location.url is None:  # SQLite: its BEGIN IMMEDIATE waits for the file's one write lock
        done.wait(0.5)
        return
    deadline = time.monotonic() + 30
    while not done.is_set():
        watcher = raw_connection(location)
        try:
            row = watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = ?",
                (conn.raw.info.backend_pid,),
            ).fetchone()
        finally:
            watcher.close()
        if row is not None and row[0] == "Lock":
            return
        assert time.monotonic() < deadline, (
            "the second writer neither waits for a lock nor finishes"
        )
        time.sleep(0.02)


def race(location: Location) -> list[Exception]:
    """Two writers record the same turn at the same moment: the first inserts and, before it
    commits, the second runs its statement — past NOT EXISTS, which cannot see uncommitted rows.
    Returns what the second writer raised."""
    first, second = raw_connection(location), raw_connection(location)
    begin = "BEGIN" if location.url is not None else "BEGIN IMMEDIATE"
    failed: list[Exception] = []
    done = threading.Event()

    def record() -> None:
        try:
            second.execute(begin)
            write = turn(reply="hi there, again")
            second.executemany(write.sql, write.params)
            second.execute("COMMIT")
        except Exception as exc:  # reported to the test
            failed.append(exc)
            with contextlib.suppress(Exception):  # the connection may be gone
                second.execute("ROLLBACK")
        finally:
            done.set()

    try:
        first.execute(begin)
        write = turn()
        first.executemany(write.sql, write.params)
        racer = threading.Thread(target=record)
        racer.start()
        blocked_or_done(location, second, done)
        first.execute("COMMIT")
        racer.join(timeout=60)
        assert not racer.is_alive()
    finally:
        first.close()
        second.close()
    return failed


@pytest.mark.parametrize("index", ["as migrated", "without messages_run"])
def test_two_writers_racing_store_one_copy_and_neither_fails(
    db: StateDB, location: Location, index: str
) -> None:
    """The racer's copy is a no-op: no second row, and no error for its writer (its conflict is
    ignored, not raised). On SQLite the racer waits for the file's one write lock, then NOT EXISTS
    sees the first copy; on Postgres it ran past NOT EXISTS and waits on the first copy's
    uncommitted keys, then ON CONFLICT DO NOTHING drops it — the thread's key (thread_id, idx)
    collides as well as messages_run, as both writers number the turn after the same last row."""
    if index == "without messages_run":
        drop_index(db)
    failed = race(location)
    assert failed == []
    assert stored(db) == TWO
