"""The trace's notifications on Postgres (engine/state/postgres.py, `payloads`): a transaction that
writes trace rows of several runs wakes each run's followers on other replicas once, when it commits,
with one notification naming all its runs (every listening server reads each notification), sent in
the message that carries the rows (no round trip of its own: the writer thread and every step waiting
for its commit wait for each)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from engine.state import postgres

# the statement of engine/state/store.py's `insert_events`, on the migrated schema of a fresh database
INSERT = (
    "INSERT OR REPLACE INTO events (run_id, seq, type, step, time, data) VALUES (?, ?, ?, ?, ?, ?)"
)


@pytest.fixture
def listener(pg_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    conn = psycopg.connect(pg_url, autocommit=True)
    conn.execute(f"LISTEN {postgres.EVENTS_CHANNEL}")
    yield conn
    conn.close()


def _heard(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """The payloads of the trace's notifications."""
    return [n.payload for n in conn.notifies(timeout=1.0) if n.channel == postgres.EVENTS_CHANNEL]


def test_the_trace_rows_of_several_runs_wake_each_run_once_in_the_rows_message(
    pg_url: str, listener: psycopg.Connection[tuple[object, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = postgres.connect(pg_url)
    sent: list[str] = []
    raw_execute = writer.raw.execute

    def counted(query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append(str(query))
        return raw_execute(query, params, **kwargs)

    cursor_execute = psycopg.ClientCursor.execute

    def sent_by_cursor(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append(str(query))
        return cursor_execute(cursor, query, params, **kwargs)

    try:
        monkeypatch.setattr(writer.raw, "execute", counted)
        monkeypatch.setattr(psycopg.ClientCursor, "execute", sent_by_cursor)
        rows = [
            (run, seq, "step_started", "s", "2026-11-29T00:00:00.000Z", "{}")
            for run, seq in (("run-a", 1), ("run-b", 1), ("run-a", 2), ("run-c", 1))
        ]
        with writer.transaction():
            assert writer.executemany(INSERT, rows).rowcount == 4
            assert _heard(listener) == [], "nothing is announced before the commit"
        assert _heard(listener) == ["run-a run-b run-c"]
        notifies = [query for query in sent if "pg_notify" in query]
        assert len(notifies) == 1, sent
        # in the message that carries the rows: no round trip of its own
        assert "INSERT INTO events" in notifies[0], notifies
        # a single row announces its run the same way
        with writer.transaction():
            writer.execute(
                INSERT, ("run-d", 1, "step_started", "s", "2026-11-29T00:00:00.000Z", "{}")
            )
        assert _heard(listener) == ["run-d"]
    finally:
        writer.close()


def test_a_commit_of_many_runs_names_them_in_notifications_under_postgres_limit() -> None:
    runs = [f"run-{n:060d}" for n in range(300)]  # 64 characters, the longest a chosen id may be
    payloads = list(postgres.payloads([*runs, *runs[:10]]))
    assert len(payloads) == 3
    assert all(len(payload.encode()) < 8000 for payload in payloads)
    assert [run for payload in payloads for run in payload.split(" ")] == runs
    assert list(postgres.payloads([])) == []


def test_a_listening_server_wakes_each_run_a_notification_names(pg_url: str) -> None:
    async def main() -> list[str]:
        woken: list[str] = []
        stop = asyncio.Event()
        listening = asyncio.create_task(
            postgres.listen_events(pg_url, lambda run: woken.append(run), stop)
        )
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            for _ in range(100):  # until the listener's LISTEN is in place
                await conn.execute(
                    "SELECT pg_notify(%s, %s)", (postgres.EVENTS_CHANNEL, "run-a run-b")
                )
                await asyncio.sleep(0.05)
                if woken:
                    break
        stop.set()
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            # the listener looks at `stop` after its next notification
            await conn.execute("SELECT pg_notify(%s, %s)", (postgres.EVENTS_CHANNEL, "run-z"))
        await asyncio.wait_for(listening, 10)
        return woken

    woken = asyncio.run(main())
    assert woken[:2] == ["run-a", "run-b"], woken
