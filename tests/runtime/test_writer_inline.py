"""The writer's per-step shortcuts (engine/state/writer.py): a checkpoint's pending writes wait for
it without a wake-up or a transaction of their own, and a lone run commits on its own thread —
without ever jumping the queue or stalling the event loop on another process's lock."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.state.checkpointer import connect
from engine.state.database import Connection
from engine.state.writer import SqliteWriter, Write


def _open(path: Path) -> sqlite3.Connection:
    conn = connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT, thread INTEGER)")
    # which thread executed a statement: the writer's own, or the caller's (an inline commit)
    conn.create_function("thread_id", 0, threading.get_ident)
    return conn


@pytest.fixture
def inline(tmp_path: Path) -> Iterator[tuple[SqliteWriter, Path]]:
    path = tmp_path / "w.db"
    # a long idle tick: nothing is committed by the tick while a test looks
    w = SqliteWriter(lambda: _open(path), inline=True, lazy_delay=30.0)
    yield w, path
    w.close()


def insert(k: int, v: str = "x") -> Write:
    return Write("INSERT INTO t (k, v, thread) VALUES (?, ?, thread_id())", (k, v))


def rows(path: Path) -> list[tuple[int, str, int]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT k, v, thread FROM t ORDER BY k").fetchall()


def test_quiet_writes_wait_for_the_next_write_and_keep_their_place(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    w = SqliteWriter(lambda: _open(path), lazy_delay=30.0)
    try:

        async def main() -> None:
            w.write_nowait(insert(1, "pending"), wake=False)
            # executed after the quiet row (it updates it), in the same transaction
            await w.write(Write("UPDATE t SET v = 'checkpointed' WHERE k = 1"))

        before = w.commits
        asyncio.run(main())
        assert [row[:2] for row in rows(path)] == [(1, "checkpointed")]
        assert w.commits - before == 1
    finally:
        w.close()


def test_quiet_writes_are_committed_by_close(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    w = SqliteWriter(lambda: _open(path), lazy_delay=30.0)
    w.write_nowait(insert(1), wake=False)
    w.close()
    assert [row[:2] for row in rows(path)] == [(1, "x")]


def test_a_lone_run_commits_on_its_own_thread(inline: tuple[SqliteWriter, Path]) -> None:
    w, path = inline

    async def main() -> None:
        with w.running():
            w.write_nowait(insert(1, "pending"), wake=False)
            await w.write(insert(2))
            assert len(rows(path)) == 2  # committed before write() returned
        with w.running(), w.running():  # runs side by side: through the writer thread
            await w.write(insert(3))
        await w.write(insert(4))  # no run declared (a standalone graph's saver): through it too

    asyncio.run(main())
    me = threading.get_ident()
    got = rows(path)
    assert [row[:2] for row in got] == [(1, "pending"), (2, "x"), (3, "x"), (4, "x")]
    assert [row[2] == me for row in got] == [True, True, False, False]


def test_an_inline_write_never_overtakes_queued_work(inline: tuple[SqliteWriter, Path]) -> None:
    w, path = inline
    started, release = threading.Event(), threading.Event()

    def slow(conn: Connection) -> None:
        started.set()
        release.wait(10)
        conn.execute("INSERT INTO t (k, v, thread) VALUES (1, 'first', thread_id())")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with w.running():
            first = asyncio.ensure_future(w.call(slow))
            await loop.run_in_executor(None, started.wait, 10)  # the writer thread is committing it
            second = asyncio.ensure_future(w.write(Write("UPDATE t SET v = 'second' WHERE k = 1")))
            await asyncio.sleep(0)
            release.set()
            await asyncio.gather(first, second)

    asyncio.run(main())
    assert [row[:2] for row in rows(path)] == [(1, "second")]


def test_another_process_holding_the_lock_does_not_stall_the_event_loop(
    inline: tuple[SqliteWriter, Path],
) -> None:
    w, path = inline
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    async def main() -> None:
        tick = asyncio.ensure_future(ticker())
        with w.running():
            write = asyncio.ensure_future(w.write(insert(1)))
            while ticks < 5:  # the loop goes on while the write waits for the lock (queued)
                await asyncio.sleep(0.001)
            assert not write.done()
            other.execute("COMMIT")
            await write
        tick.cancel()

    try:
        asyncio.run(main())
    finally:
        other.close()
    got = rows(path)
    assert [row[:2] for row in got] == [(1, "x")] and got[0][2] != threading.get_ident()


def test_inline_commits_set_the_busy_timeout_once_and_the_writer_thread_waits_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    said: list[str] = []

    def opened() -> sqlite3.Connection:
        conn = _open(path)
        conn.set_trace_callback(said.append)
        return conn

    w = SqliteWriter(opened, inline=True, lazy_delay=30.0)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:

        async def main() -> None:
            with w.running():
                for k in range(5):
                    await w.write(insert(k))
            # a lone run's five commits on its own thread: the timeout set to 0 once, not per commit
            assert [s for s in said if s.startswith("PRAGMA busy_timeout =")] == [
                "PRAGMA busy_timeout = 0"
            ]
            other.execute("BEGIN IMMEDIATE")  # another process writing, for a moment
            threading.Timer(0.3, other.execute, ("COMMIT",)).start()
            # no run declared: through the writer thread, which waits for the lock again
            await w.write(insert(5))

        asyncio.run(main())
    finally:
        w.close()
        other.close()
    assert [row[0] for row in rows(path)] == list(range(6))
    # the writer thread set its own timeout back before it began (and so waited for the lock)
    sets = [s for s in said if s.startswith("PRAGMA busy_timeout =")]
    assert len(sets) == 2 and sets[-1] != "PRAGMA busy_timeout = 0", sets
