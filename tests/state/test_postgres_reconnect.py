"""A process whose Postgres sessions the server ended (a restart, a failover, an administrator, the idle
timeout after the process was frozen mid-transaction) reconnects instead of failing for good
(engine/state/postgres.py, `PgConnection.reopen`; docs/postgres.md, "A lost connection"):

- a session lost while the writer waited between batches costs no write: the next batch's BEGIN meets
  the lost session, nothing of the batch was sent yet, and it begins on a new one;
- a session lost in the middle of a batch's transaction fails that batch (its waiters get the
  `StateError`) and nothing of it is sent again; the next batch goes through on a new session;
- a read that meets a lost session is run once more on a new one, whether it goes through the
  `StateDB` (`read`) or LangGraph's `PostgresSaver` (`get_tuple`, `list`), which share the reader
  connection: after either reopened it, the other reads through the new session too;
- while the server refuses new sessions, writes and reads fail with a one-line `StateError` (the
  URL's password masked), and go through again once it accepts them;
- the memory store (engine/state/memory.py): the call that meets the lost session fails, the next one
  opens a new session.

They use their own database of the Postgres test cluster (`pg_url`): run in the Postgres pass only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from engine.core.events import RunStatus
from engine.state import store
from engine.state.checkpointer import StateDB
from engine.state.database import Connection, StateError
from engine.state.location import Location
from engine.state.memory import MemoryStore
from engine.state.postgres import PgConnection
from engine.state.store import RunRecord
from engine.state.writer import Write
from tests.conftest import postgres_cluster, test_backend
from tests.support.postgres import PASSWORD

THREAD: RunnableConfig = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


@pytest.fixture
def db(pg_url: str, tmp_path: Path) -> Iterator[StateDB]:
    if test_backend() != "postgres":  # its own database (pg_url) in either pass: once is enough
        pytest.skip("about Postgres sessions: run in the Postgres pass (.ci/test)")
    state = StateDB(Location(tmp_path / "state.db", pg_url))
    try:
        state.writer.write_sync(
            store.save_definition("digest", "flow", 1, "{}", "2026-01-01T00:00:00Z")
        )
        yield state
    finally:
        state.close()


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """Another session on the database: the one that ends the StateDB's."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def _insert(run_id: str) -> Write:
    """A run row (of the definition `db` stored)."""
    return store.insert_run(
        RunRecord(
            id=run_id,
            flow="flow",
            version=1,
            digest="digest",
            status=RunStatus.FINISHED,
            inputs={},
            created="2026-01-01T00:00:00Z",
        )
    )


def _ids(conn: Connection) -> list[str]:
    return sorted(store.run_ids(conn))


def _end_sessions(admin: psycopg.Connection[Any], pids: list[int] | None = None) -> list[int]:
    """End every other session on the database (or those of `pids`), as a server restart would; the
    process ids of the sessions ended, once they are gone."""
    rows = admin.execute(
        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND (%s::int[] IS NULL OR pid = ANY(%s::int[]))",
        (pids, pids),
    ).fetchall()
    ended = [int(pid) for pid, done in rows if done]
    deadline = time.monotonic() + 30
    while admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (ended,)
    ).fetchone() != (0,):
        assert time.monotonic() < deadline, "the ended sessions did not go away"
        time.sleep(0.02)
    return ended


def _sessions(db: StateDB) -> tuple[int, int]:
    """The server process ids of the writer's and the reader's sessions now."""
    writer = db.writer.call_sync(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    reader = db.read(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    return int(writer), int(reader)


def _checkpoint(db: StateDB) -> str:
    checkpoint = empty_checkpoint()
    db.saver.put(THREAD, checkpoint, {"source": "input", "step": -1, "parents": {}}, {})
    return str(checkpoint["id"])


def test_sessions_the_server_ended_are_replaced_and_lose_no_write_or_read(
    db: StateDB, admin: psycopg.Connection[Any]
) -> None:
    db.writer.write_sync(_insert("before"))
    checkpoint = _checkpoint(db)
    first = _sessions(db)
    # the writer's and the reader's: nothing else holds one
    assert sorted(_end_sessions(admin)) == sorted(first)

    # ended while the writer waited between batches: the next write goes through, on a new session
    db.writer.write_sync(_insert("after"))
    # the checkpointer's read meets the lost reader session first: it is run again on a new one
    found = db.saver.get_tuple(THREAD)
    assert found is not None and found.checkpoint["id"] == checkpoint
    assert db.read(_ids) == [
        "after",
        "before",
    ]  # the StateDB's reads share the checkpointer's new session
    second = _sessions(db)
    assert set(second).isdisjoint(first)

    _end_sessions(admin)
    # now the StateDB's read meets it first: the checkpointer reads through the session it opened
    assert db.read(_ids) == ["after", "before"]
    assert [item.checkpoint["id"] for item in db.saver.list(THREAD)] == [checkpoint]
    assert db.saver.get_tuple(THREAD) is not None
    db.writer.write_sync(_insert("later"))
    assert db.read(_ids) == ["after", "before", "later"]
    assert set(_sessions(db)).isdisjoint(second)


def test_a_batch_whose_session_ends_mid_transaction_fails_and_is_not_sent_again(
    db: StateDB, admin: psycopg.Connection[Any]
) -> None:
    def cut_short(conn: Connection) -> None:  # in the batch's transaction, as a frozen replica's is
        half, rest = _insert("half"), _insert("rest")
        conn.execute(half.sql, half.params)
        assert isinstance(conn, PgConnection)
        _end_sessions(admin, [conn.raw.info.backend_pid])
        conn.execute(rest.sql, rest.params)

    with pytest.raises(StateError, match="cannot be used") as failed:
        db.writer.call_sync(cut_short)
    assert PASSWORD not in str(failed.value) and "***" in str(failed.value)
    db.writer.write_sync(_insert("next"))  # the next batch, on a new session
    # the server rolled the cut-short transaction back, and nothing of it was sent again
    assert db.read(_ids) == ["next"]


def test_while_the_server_refuses_sessions_writes_and_reads_fail_then_go_through_again(
    db: StateDB, admin: psycopg.Connection[Any]
) -> None:
    name = str(admin.info.dbname)
    db.writer.write_sync(_insert("before"))
    # from another database: the one refusing sessions cannot be its own
    server = psycopg.connect(postgres_cluster().url("postgres"), autocommit=True)
    server.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")  # our own name (t<pid>_<n>)
    try:
        _end_sessions(admin)
        for attempt in range(2):  # each one tries to reconnect, and fails as the first did
            with pytest.raises(StateError, match="cannot connect to the state database") as refused:
                db.writer.write_sync(_insert(f"refused{attempt}"))
            assert PASSWORD not in str(refused.value) and "***" in str(refused.value)
            with pytest.raises(StateError, match="cannot connect to the state database"):
                db.read(_ids)
            with pytest.raises(StateError, match="cannot connect to the state database"):
                db.saver.get_tuple(THREAD)
    finally:
        server.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
        server.close()
    db.writer.write_sync(_insert("after"))
    assert db.read(_ids) == ["after", "before"]
    assert db.saver.get_tuple(THREAD) is None


def test_the_memory_store_opens_a_new_session_after_the_call_that_met_the_lost_one(
    db: StateDB, admin: psycopg.Connection[Any], pg_url: str, tmp_path: Path
) -> None:
    memory = MemoryStore(Location(tmp_path / "state.db", pg_url))
    try:
        memory.store().put(("users", "ada", "preferences"), "tone", {"value": "dry"})
        _end_sessions(admin)
        # LangGraph's store, on the session that is gone
        with pytest.raises(psycopg.OperationalError):
            memory.store().get(("users", "ada", "preferences"), "tone")
        found = memory.store().get(("users", "ada", "preferences"), "tone")
        assert found is not None and found.value == {"value": "dry"}
        memory.store().put(("users", "ada", "preferences"), "tone", {"value": "warm"})
    finally:
        memory.close()
