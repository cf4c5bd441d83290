"""The group-commit writer: ordering, batching, failure isolation, any thread and any loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.state.checkpointer import connect
from engine.state.database import Connection
from engine.state.writer import SqliteWriter, Write, WriterClosed


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[SqliteWriter, Path]]:
    path = tmp_path / "w.db"

    def open_conn() -> sqlite3.Connection:
        conn = connect(path)
        conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
        return conn

    w = SqliteWriter(open_conn)
    yield w, path
    w.close()


def rows(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT k, v FROM t ORDER BY k").fetchall()


def insert(k: int, v: str = "x") -> Write:
    return Write("INSERT INTO t (k, v) VALUES (?, ?)", (k, v))


def test_acknowledged_writes_are_visible_to_other_connections(
    writer: tuple[SqliteWriter, Path],
) -> None:
    w, path = writer

    async def main() -> None:
        await w.write(insert(1, "a"), insert(2, "b"))
        assert rows(path) == [(1, "a"), (2, "b")]

    asyncio.run(main())


def test_concurrent_writers_share_transactions(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer

    async def main() -> None:
        await asyncio.gather(*(w.write(insert(i)) for i in range(500)))

    before = w.commits
    asyncio.run(main())
    assert len(rows(path)) == 500
    assert w.commits - before < 500  # grouped: far fewer commits than writers


def test_a_failing_item_fails_alone(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer

    async def main() -> list[BaseException | None]:
        results = await asyncio.gather(
            w.write(insert(1, "first")),
            w.write(insert(1, "dup"), insert(2)),
            w.write(insert(3)),
            return_exceptions=True,
        )
        return list(results)

    first, dup, third = asyncio.run(main())
    assert first is None and third is None
    assert isinstance(dup, sqlite3.IntegrityError)
    # the failing item's other statement was rolled back with it
    assert rows(path) == [(1, "first"), (3, "x")]


def test_queue_order_is_execution_order(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer
    w.write_nowait(insert(1, "old"))
    w.write_nowait(Write("UPDATE t SET v = ? WHERE k = ?", ("new", 1)))
    w.write_sync()  # barrier
    assert rows(path) == [(1, "new")]


def test_call_runs_in_a_transaction_and_returns(writer: tuple[SqliteWriter, Path]) -> None:
    w, _ = writer
    w.write_sync(insert(1))

    def bump(conn: Connection) -> int:
        return int(conn.execute("UPDATE t SET v = 'y' WHERE k = 1").rowcount)

    assert w.call_sync(bump) == 1
    assert asyncio.run(w.call(lambda conn: conn.execute("SELECT v FROM t").fetchone()[0])) == "y"


def test_writes_from_threads_and_separate_loops(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer

    def in_thread(base: int) -> None:
        async def main() -> None:
            await asyncio.gather(*(w.write(insert(base + i)) for i in range(50)))

        asyncio.run(main())

    threads = [threading.Thread(target=in_thread, args=(n * 100,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for n in range(4, 6):
        w.write_sync(insert(n * 100))
    for thread in threads:
        thread.join()
    assert len(rows(path)) == 202


def test_close_commits_what_is_queued_then_refuses(tmp_path: Path) -> None:
    path = tmp_path / "c.db"

    def open_conn() -> sqlite3.Connection:
        conn = connect(path)
        conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
        return conn

    w = SqliteWriter(open_conn)
    for i in range(100):
        w.write_nowait(insert(i))
    w.close()
    assert len(rows(path)) == 100
    with pytest.raises(WriterClosed, match="the state database is closed"):
        w.write_nowait(insert(1000))
    w.close()  # idempotent


def test_a_connection_that_cannot_open_is_reported(tmp_path: Path) -> None:
    def broken() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        SqliteWriter(broken)


def test_lazy_rows_ride_along_or_go_within_the_delay(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer
    before = w.commits
    for i in range(10):
        w.write_nowait(insert(i), lazy=True)
    w.write_sync(insert(100))  # an awaited write carries all of them in its transaction
    assert len(rows(path)) == 11
    assert w.commits - before == 1
    w.write_nowait(insert(200), lazy=True)  # alone: committed after the lazy delay
    deadline = time.monotonic() + 5
    while len(rows(path)) < 12:
        assert time.monotonic() < deadline, "the lazy row was never committed"
        time.sleep(0.01)


def test_a_failing_lazy_row_does_not_sink_the_batch(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer
    w.write_sync(insert(1))
    w.write_nowait(insert(1, "dup"), lazy=True)
    w.write_sync(insert(2))
    assert rows(path) == [(1, "x"), (2, "x")]


class _Snatched(sqlite3.Connection):
    """A write connection that lets another connection take the write lock right after a rollback."""

    rival: sqlite3.Connection | None = None

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        cursor = super().execute(sql, *args)
        if sql == "ROLLBACK" and self.rival is not None:
            self.rival.execute("BEGIN IMMEDIATE")
        return cursor


def test_losing_the_lock_while_replaying_a_failed_batch_fails_the_batch_not_the_writer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode = WAL")
    setup.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    setup.close()
    rival = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=0, factory=_Snatched
    )
    conn.rival = rival
    explained: list[Exception] = []

    def explain(exc: Exception) -> BaseException:
        explained.append(exc)
        return RuntimeError(f"explained: {exc}")

    w = SqliteWriter(lambda: conn, explain=explain)
    try:
        # the batch: a good row and a duplicate key, so it is rolled back and replayed item by item
        with pytest.raises(RuntimeError, match="explained: database is locked"):
            # a dead writer would never answer
            asyncio.run(asyncio.wait_for(w.write(insert(1), insert(1)), 10))
        assert [getattr(exc, "sqlite_errorcode", None) for exc in explained] == [
            sqlite3.SQLITE_BUSY
        ]
        conn.rival = None
        rival.execute("ROLLBACK")
        w.write_sync(insert(2))  # the writer thread lives on
    finally:
        w.close()
        rival.close()
    assert rows(path) == [(2, "x")]


def _guard(run: str) -> Write:
    # counts its executions: a guard that ran twice for one run shows n = 2
    return Write("UPDATE g SET n = n + 1 WHERE id = ?", (run,), mergeable=True, guard=True)


def test_identical_guards_of_one_batch_are_checked_once(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer
    w.write_sync(
        Write("CREATE TABLE g (id TEXT PRIMARY KEY, n INTEGER)"),
        Write("INSERT INTO g VALUES ('r', 0)"),
    )
    for k in range(5):  # a run's trace rows, each with its fence, ride along with the next batch
        w.write_nowait(
            _guard("r"),
            Write("INSERT INTO t (k, v) VALUES (?, ?)", (k, "x"), mergeable=True),
            lazy=True,
        )
    w.write_sync()
    assert len(rows(path)) == 5
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT n FROM g").fetchone()[0] == 1


def test_a_guard_that_fails_fails_only_its_items(writer: tuple[SqliteWriter, Path]) -> None:
    w, path = writer
    w.write_sync(
        Write("CREATE TABLE g (id TEXT PRIMARY KEY, n INTEGER)"),
        Write("INSERT INTO g VALUES ('r', 0)"),
    )
    for k, run in enumerate(["r", "gone", "r"]):  # no row for run 'gone': its guard changes nothing
        w.write_nowait(
            _guard(run),
            Write("INSERT INTO t (k, v) VALUES (?, ?)", (k, run), mergeable=True),
            lazy=True,
        )
    w.write_sync()
    assert rows(path) == [(0, "r"), (2, "r")]


class Vanishing(sqlite3.Connection):
    """A connection that goes away inside a transaction: as a Postgres session the server ended while its
    process was frozen in a transaction (engine/state/postgres.py, IDLE_IN_TRANSACTION)."""

    gone = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if Vanishing.gone and not sql.startswith("BEGIN"):
            self.close()  # every later statement, ROLLBACK and BEGIN included, fails
            raise sqlite3.OperationalError("the connection is closed")
        return super().execute(sql, parameters)


def test_a_connection_gone_mid_batch_fails_its_waiters_and_every_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer thread outlives its connection: each waiter gets an error, none waits for good (a replica
    frozen past the idle timeout then ends its runs instead of hanging them)."""
    path = tmp_path / "w.db"

    def open_conn() -> sqlite3.Connection:
        conn = sqlite3.connect(
            path, factory=Vanishing, isolation_level=None, check_same_thread=False
        )
        conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
        return conn

    w = SqliteWriter(open_conn, lazy_delay=60)
    pool = concurrent.futures.ThreadPoolExecutor(1)  # a waiter left hanging must not hang the test
    try:
        monkeypatch.setattr(Vanishing, "gone", True)
        first = pool.submit(w.write_sync, insert(1))
        with pytest.raises(sqlite3.OperationalError, match="the connection is closed"):
            first.result(timeout=30)  # the batch failed, and its ROLLBACK too
        later = pool.submit(w.write_sync, insert(2))
        with pytest.raises(sqlite3.Error, match="closed"):
            later.result(timeout=30)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        w.close()
