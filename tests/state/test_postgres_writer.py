"""The group-commit writer on Postgres (engine/state/writer.py, `_run_all`; engine/state/postgres.py,
`script`): a batch's writes go to the server in one message between its BEGIN and COMMIT, not a round
trip each, and still fail item by item — a statement that fails, or a guard that changes fewer rows
than it must, fails its own item only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from engine.state import postgres
from engine.state.writer import GuardFailed, SqliteWriter, Write

INSERT = "INSERT INTO t (k, v) VALUES (?, ?)"


def _insert(k: int, v: str = "x", *, mergeable: bool = False) -> Write:
    return Write(INSERT, (k, v), mergeable=mergeable)


def _guard(run: str) -> Write:
    return Write("UPDATE g SET n = n + 1 WHERE id = ?", (run,), mergeable=True, guard=True)


class Sent(list[str]):
    """The messages sent on the connections `watch`ed: by psycopg's `Connection.execute`, and by its
    client cursors (the scripts). Other sessions of the test cluster are not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.watched: list[psycopg.Connection[Any]] = []

    def watch(self, conn: postgres.PgConnection) -> postgres.PgConnection:
        self.watched.append(conn.raw)
        return conn

    def note(self, conn: psycopg.Connection[Any], query: Any) -> None:
        if any(conn is watched for watched in self.watched):
            self.append(str(query))


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    messages = Sent()
    connection_execute = psycopg.Connection.execute
    cursor_execute = psycopg.ClientCursor.execute

    def by_connection(conn: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        messages.note(conn, query)
        return connection_execute(conn, query, params, **kwargs)

    def by_cursor(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        messages.note(cursor.connection, query)
        return cursor_execute(cursor, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", by_connection)
    monkeypatch.setattr(psycopg.ClientCursor, "execute", by_cursor)
    return messages


@pytest.fixture
def writer(pg_url: str, sent: Sent) -> Iterator[SqliteWriter]:
    setup = postgres.connect(pg_url)
    setup.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    setup.execute("CREATE TABLE g (id TEXT PRIMARY KEY, n INTEGER)")
    setup.execute("INSERT INTO g VALUES ('r', 0)")
    setup.close()
    # a long lazy delay: the lazy items below wait for the write that carries them
    w = SqliteWriter(
        lambda: sent.watch(postgres.connect(pg_url)), lazy_delay=60, lost=lambda c: False
    )
    yield w
    w.close()


def _rows(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT k, v FROM t ORDER BY k").fetchall()


def test_a_batch_of_many_items_is_one_message_between_begin_and_commit(
    writer: SqliteWriter, pg_url: str, sent: Sent
) -> None:
    for k in range(6):  # runs' rows, each with its fence (checked once: the same row)
        writer.write_nowait(_guard("r"), _insert(k, mergeable=k % 2 == 0), lazy=True)
    # an item not merged, queued without waking the writer: it goes in the next batch
    writer.write_nowait(_insert(20), Write("UPDATE t SET v = 'y' WHERE k = ?", (20,)), wake=False)
    sent.clear()
    writer.write_sync(_insert(10), _insert(11))
    assert sent[0] == "BEGIN" and sent[-1] == "COMMIT", sent
    assert len(sent) == 3, sent
    assert sent[1].count("INSERT INTO t") == 9 and sent[1].count("UPDATE g") == 1, sent[1]
    assert _rows(pg_url) == [*((k, "x") for k in (0, 1, 2, 3, 4, 5, 10, 11)), (20, "y")]


def test_a_statement_that_fails_in_the_message_fails_only_its_item(
    writer: SqliteWriter, pg_url: str
) -> None:
    writer.write_sync(_insert(1, "first"))
    writer.write_nowait(_insert(2), lazy=True)
    writer.write_nowait(_insert(1, "again"), _insert(3), lazy=True)  # a duplicate key: fails
    writer.write_nowait(_insert(4), lazy=True)
    writer.write_sync(_insert(5))
    assert _rows(pg_url) == [(1, "first"), (2, "x"), (4, "x"), (5, "x")]


def test_a_guard_that_fails_in_the_message_fails_only_its_items(
    writer: SqliteWriter, pg_url: str
) -> None:
    for k, run in enumerate(["r", "gone", "r"]):  # no row for 'gone': its guard changes nothing
        writer.write_nowait(_guard(run), _insert(k, run), lazy=True)
    with pytest.raises(GuardFailed, match="UPDATE g SET n"):
        writer.write_sync(_guard("gone"), _insert(7, "unguarded"))
    assert _rows(pg_url) == [(0, "r"), (2, "r")]


def test_a_call_sees_the_writes_queued_before_it(writer: SqliteWriter, pg_url: str) -> None:
    writer.write_nowait(_insert(1), _insert(2, mergeable=True), lazy=True)

    def count(conn: Any) -> int:
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])

    assert writer.call_sync(count) == 2


def test_a_script_counts_each_statements_rows_across_messages(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, sent: Sent
) -> None:
    conn = sent.watch(postgres.connect(pg_url))
    try:
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        monkeypatch.setattr(postgres, "BATCH_CHARS", 100)  # about two statements a message
        sent.clear()
        with conn.transaction():
            counts = conn.script(
                [
                    (INSERT, [(k, "x") for k in range(5)]),
                    ("UPDATE t SET v = 'y' WHERE k < ?", [(3,)]),
                    ("UPDATE t SET v = 'z' WHERE k = ?", [(99,), (4,)]),
                    ("DELETE FROM t WHERE k = ?", []),
                ]
            )
        assert counts == [5, 3, 1, 0]
        assert len(sent) > 4, sent  # BEGIN, several messages, COMMIT
    finally:
        conn.close()
    assert _rows(pg_url) == [(0, "y"), (1, "y"), (2, "y"), (3, "x"), (4, "z")]
