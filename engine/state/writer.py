"""Group commit: one thread owns the write connection, and the statements of many concurrent runs
share transactions.

Each committed SQLite transaction costs far more than the rows in it (a WAL append and, with
`synchronous=FULL`, an fsync). A durable engine that commits every checkpoint on its own spends
most of its time there (docs/runtime.md, Performance; bench/bench_saver.py). Here every writer
hands its statements to one thread and awaits the commit of the transaction that carries them;
while the thread commits one batch the next one fills up, so under load hundreds of checkpoints
share one commit and nobody returns before their data is in the database. A crash can therefore
lose only work whose writer was still waiting — never a write that was acknowledged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.state import synchronous
from engine.state.database import DB_ERRORS, Connection, Scripted, StateError

log = logging.getLogger(__name__)

T = TypeVar("T")
Call = Callable[[Connection], Any]
# what BEGIN or COMMIT can raise: the database failed, not one statement (a lost server is a StateError)
_TRANSACTION_ERRORS: tuple[type[Exception], ...] = (*DB_ERRORS, StateError)


@dataclass(frozen=True, slots=True)
class Write:
    """One statement; with `many`, `params` is a sequence of parameter rows (executemany).

    `mergeable` statements insert rows that nothing else in the queue depends on (checkpoint
    rows: keyed by ids no other statement touches), so consecutive ones with the same SQL run as
    one executemany: in a batch of hundreds of checkpoints that is a handful of calls into SQLite,
    each of which hands the GIL over twice.
    """

    sql: str
    params: Sequence[Any] = ()
    many: bool = False
    mergeable: bool = False
    # an UPDATE that must change one row per parameter row, else it fails (GuardFailed) with the
    # statements of its item: the fence of a replica's writes (engine/state/fencing.py)
    guard: bool = False


class GuardFailed(Exception):
    """A guarded statement changed fewer rows than it had to: its item was not written."""


def _run(conn: Connection, write: Write) -> None:
    if write.many:
        cursor = conn.executemany(write.sql, write.params)
        expected = len(write.params)
    else:
        cursor = conn.execute(write.sql, write.params)
        expected = 1
    if write.guard and cursor.rowcount != expected:
        raise GuardFailed(write.sql)


def _run_all(conn: Connection, writes: list[Write]) -> None:
    """`writes` in order: on a connection to a server, in one message (`Scripted`), then the guards
    checked; a guard that failed fails the batch as one that failed on its own would (the statements
    sent after it are rolled back with the rest)."""
    if not isinstance(conn, Scripted):
        for write in writes:
            _run(conn, write)
        return
    counts = conn.script([(w.sql, w.params if w.many else (w.params,)) for w in writes])
    for write, count in zip(writes, counts, strict=True):
        if write.guard and count != (len(write.params) if write.many else 1):
            raise GuardFailed(write.sql)


class _Pending:
    """The writes of a batch's fast path, waiting until a call needs the connection, or the batch's
    end (`_run_all`: on a server, one message for all of them), with runs of mergeable rows merged
    per SQL."""

    __slots__ = ("conn", "guards", "merged", "pending")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.pending: list[Write] = []
        self.merged: dict[str, list[Any]] = {}
        # guard rows already merged, per SQL: the same guard twice among merged rows is one check
        # (the rows merged between two flushes are inserts that change nothing a guard reads), so
        # the dozen trace rows and checkpoints of one run in a batch check its fence once
        self.guards: dict[str, set[Any]] = {}

    def merge(self, writes: Sequence[Write]) -> None:
        for write in writes:
            rows = write.params if write.many else (write.params,)
            if write.guard:
                seen = self.guards.setdefault(write.sql, set())
                fresh = [row for row in rows if tuple(row) not in seen]
                seen.update(tuple(row) for row in fresh)
                rows = fresh
            self.merged.setdefault(write.sql, []).extend(rows)

    def flush(self) -> None:
        """The merged rows, as one write per SQL, behind the pending writes."""
        for sql, params in self.merged.items():
            if params:
                self.pending.append(Write(sql, params, many=True, guard=sql in self.guards))
        self.merged.clear()
        self.guards.clear()

    def send(self) -> None:
        self.flush()
        if self.pending:
            _run_all(self.conn, self.pending)
            self.pending.clear()


@dataclass(slots=True)
class _Item:
    work: Sequence[Write] | Call
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[Any] | concurrent.futures.Future[Any] | None = None
    lazy: bool = False
    # the disk guarantee its writer asked for (engine/state/synchronous.py; None: the yard's)
    level: str | None = None


_STOP = _Item(())
_Result = tuple[_Item, Any, BaseException | None]  # an item, the value of its call, its error


class WriterClosed(RuntimeError):
    """The writer was closed; nothing more can be written through it."""


class SqliteWriter:
    """Commits statements from any thread or event loop in shared transactions.

    `await write(...)` returns once the statements are committed; `write_nowait(...)` queues them
    behind everything already queued (the order of the queue is the order of execution).
    A statement that fails only fails its own item: a batch that hits an error is rolled back
    and replayed item by item, each in a savepoint.

    A connection to a database server can be lost (the server restarted, failed over, or ended the
    session of a process frozen mid-transaction): `lost(conn)` says so, and the connection is then
    replaced through `connect` before the next batch (`_batch`). The batch that met the lost session
    fails whole — its waiters get the error — unless it failed on its BEGIN, before anything of it
    was sent: then it begins again on the new session. Nothing is sent again once its transaction
    began: that transaction may have been rolled back by the server, or committed if its COMMIT got
    there.
    """

    def __init__(
        self,
        connect: Callable[[], Connection],
        *,
        max_batch: int = 2000,
        window: float = 0.0,
        lazy_delay: float = 0.05,
        name: str = "blockyard-writer",
        explain: Callable[[Exception], BaseException] | None = None,
        inline: bool = False,
        lost: Callable[[Connection], bool] | None = None,
        levels: synchronous.Levels | None = None,
    ) -> None:
        """`inline`: a lone run's `write` may commit on the caller's thread (see `write`); only for a
        connection that may be used from any thread and whose commits do not wait for the disk.
        `lost`: whether a connection's session is gone for good (see the class), for a server's
        connections (a SQLite connection is never lost this way). `levels`: how a transaction gets the
        disk guarantee its writes ask for (engine/state/synchronous.py); None: the connection's, always."""
        self._connect = connect
        self._levels = levels
        self._lost = lost
        # what a batch's waiters get when the transaction itself fails (the lock, the file)
        self._explain = explain or (lambda exc: exc)
        # entries are lists of items: a write and the quiet items before it go with one wake-up
        self._queue: queue.SimpleQueue[list[_Item]] = queue.SimpleQueue()
        self._queued = 0  # entries put and not yet committed (under _lock)
        self._conn: Connection | None = None  # the connection, for inline commits
        self._busy_ms = 0
        # the busy timeout set on `_conn` now (None: not known): an inline commit begins at 0, the
        # writer thread at `_busy_ms`; each sets it only when the other changed it (`_busy`)
        self._busy_now: int | None = None
        self._conn_lock = threading.Lock()  # held while a batch is gathered and committed
        self._inline = inline and window == 0.0
        self._runs = 0  # runs in progress (see `running`)
        self._lazy: list[_Item] = []
        self._quiet: list[
            _Item
        ] = []  # see `write_nowait(wake=False)`: queued in order, no wake-up yet
        self._max_batch = max_batch
        self._window = window
        self._lazy_delay = lazy_delay
        self._closed = False
        self._lock = threading.Lock()
        self.commits = 0  # transactions committed, for benchmarks
        self.items = 0  # items carried by them
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        # a daemon thread: a Yard that is never closed must not keep the interpreter alive
        self._thread = threading.Thread(target=self._main, args=(ready,), name=name, daemon=True)
        self._thread.start()
        ready.result()

    # ---- submitting -------------------------------------------------------------------------

    async def write(self, *writes: Write) -> None:
        """Execute `writes` and return once they are committed.

        While exactly one run is in progress (`running`) and nothing is queued or being committed,
        an `inline` writer commits them right here, on the caller's thread: a lone run's checkpoint
        then costs no hand-over to the writer thread and back (a wake-up of each, and the event
        loop's idle turn in between). With runs side by side, or writers that declared no run (a
        standalone graph on the saver, invoked any number of times at once), they go through the
        queue, where they share transactions."""
        # a commit that waits for the disk (a run of a `synchronous: full` flow) never stalls the loop
        if (
            self._inline
            and self._runs == 1
            and synchronous.weak(synchronous.current())
            and self._commit_inline(writes)
        ):
            return
        await self._submit_async(writes)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Declare a run in progress for the block's duration (see `write`)."""
        with self._lock:
            self._runs += 1
        try:
            yield
        finally:
            with self._lock:
                self._runs -= 1

    def _commit_inline(self, writes: Sequence[Write]) -> bool:
        """Commit `writes` (after the lazy and quiet rows waiting) on this thread; False when the
        writer is busy or another process holds the database's write lock (then queue them)."""
        conn = self._conn
        if conn is None or not self._conn_lock.acquire(blocking=False):
            return False
        try:
            with self._lock:
                if self._closed:
                    raise WriterClosed("the state database is closed")
                if self._queued:  # queued or being committed: they go first, in order
                    return False
                lazy, self._lazy = self._lazy, []
                quiet, self._quiet = self._quiet, []
            item = _Item(writes, level=synchronous.current())
            items = [*lazy, *quiet, item]
            level = self._level(conn, items)
            # never wait for another process's lock here (that would stall the event loop):
            # a busy database sends the write, and what was taken along, through the queue. (In WAL
            # mode only BEGIN IMMEDIATE waits for a lock; the statements after it never do.)
            self._busy(conn, 0)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except _TRANSACTION_ERRORS:
                with self._lock:
                    self._lazy[:0] = lazy
                    self._quiet[:0] = quiet
                return False
            results = self._commit(conn, items, level)
        finally:
            self._conn_lock.release()
        self._deliver([result for result in results if result[0] is not item])
        exc = next(error for done, _value, error in results if done is item)
        if exc is not None:
            raise exc
        return True

    async def call(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn(conn)` inside a write transaction on the writer thread; returns its result."""
        result: T = await self._submit_async(fn)
        return result

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed."""
        await self._submit_async(())

    def write_nowait(self, *writes: Write, lazy: bool = False, wake: bool = True) -> None:
        """Queue `writes` without waiting; a later `write`/`flush` waits for them too.

        `lazy` writes start no transaction of their own and do not even wake the writer: they ride
        along with the next write, or go within two `lazy_delay`s. They must not depend on the
        order of other writes (trace rows, for example), since a batch executes them first.
        `wake=False` writes do not wake the writer either, but keep their place in the queue: they
        are executed after everything queued before them and before everything queued after them
        (a checkpoint's pending writes, which the checkpoint that follows them carries along).
        """
        item = _Item(writes, lazy=lazy, level=synchronous.current())
        if not lazy and wake:
            self._put(item)
            return
        with self._lock:
            if self._closed:
                raise WriterClosed("the state database is closed")
            # no wake-up: waking the writer thread costs the event loop a GIL hand-over; the
            # writer looks at these rows on its next batch or its next idle tick
            (self._lazy if lazy else self._quiet).append(item)

    def write_sync(self, *writes: Write) -> None:
        """Blocking `write`, for threads that have no event loop."""
        self._submit_sync(writes)

    def call_sync(self, fn: Callable[[Connection], T]) -> T:
        """Blocking `call`."""
        result: T = self._submit_sync(fn)
        return result

    async def _submit_async(self, work: Sequence[Write] | Call) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._put(_Item(work, loop, future, level=synchronous.current()))
        return await future

    def _submit_sync(self, work: Sequence[Write] | Call) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._put(_Item(work, None, future, level=synchronous.current()))
        return future.result()

    def _put(self, item: _Item) -> None:
        with self._lock:
            if self._closed:
                raise WriterClosed("the state database is closed")
            self._enqueue(item)

    def _enqueue(self, item: _Item) -> None:
        # under the lock: the quiet items, older than anything not yet queued, go first, in the
        # same entry (one wake-up of the writer thread)
        entry = [*self._quiet, item] if self._quiet else [item]
        self._quiet = []
        self._queued += 1
        self._queue.put(entry)

    def close(self) -> None:
        """Commit what is queued, then stop the thread and close the connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._enqueue(_STOP)
        self._thread.join()

    # ---- the writer thread ------------------------------------------------------------------

    def _main(self, ready: concurrent.futures.Future[None]) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:
            ready.set_exception(exc)
            return
        if self._inline:
            self._busy_ms = self._busy_now = _busy_timeout(conn)
            self._conn = conn
        ready.set_result(None)
        try:
            while True:
                try:
                    # an idle tick every lazy_delay picks up lazy rows that no write came to carry
                    first: list[_Item] | None = self._queue.get(timeout=self._lazy_delay)
                except queue.Empty:
                    first = None
                if self._window and first is not None and first[-1] is not _STOP:
                    time.sleep(self._window)
                with self._conn_lock:  # an inline commit (see `write`) and this batch never overlap
                    items, stop, entries = self._gather(first)
                    results: list[_Result] = []
                    if items:
                        conn, results = self._batch(conn, items)
                with self._lock:
                    self._queued -= entries
                self._deliver(results)
                if stop:
                    break
        finally:
            self._conn = None
            conn.close()

    def _gather(self, first: list[_Item] | None) -> tuple[list[_Item], bool, int]:
        """The next batch (lazy rows first), whether to stop after it, and how many queue entries
        it took."""
        items = [] if first is None else list(first)
        entries = 0 if first is None else 1
        while len(items) < self._max_batch:
            try:
                items.extend(self._queue.get_nowait())
            except queue.Empty:
                break
            entries += 1
        with self._lock:
            lazy, self._lazy = self._lazy, []
            # quiet items still waiting are younger than all of `items` (anything queued after them
            # would have taken them along into the queue), so they go last
            quiet, self._quiet = self._quiet, []
        stop = any(item is _STOP for item in items)
        return lazy + [item for item in items if item is not _STOP] + quiet, stop, entries

    def _batch(self, conn: Connection, items: list[_Item]) -> tuple[Connection, list[_Result]]:
        """Commit `items` in one transaction, on `conn` or, when it was lost, on a new connection (the
        class's docstring): the connection to go on with, and each item's result."""
        try:
            conn = self._revived(conn)
            level = self._level(conn, items)
            self._busy(conn, self._busy_ms)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except _TRANSACTION_ERRORS:
                if self._lost is None or not self._lost(conn):
                    raise
                # the session ended while the writer waited (a server restart, a failover): no statement
                # of the batch was sent, so it begins on a new session rather than failing its waiters
                conn = self._revived(conn)
                level = self._level(conn, items)
                conn.execute("BEGIN IMMEDIATE")
        except Exception as exc:
            # another process held the lock for the whole busy timeout, or the server is out of reach (a
            # new connection failed too): the batch fails whole, and the next one tries again
            return conn, self._failed(items, exc)
        return conn, self._commit(conn, items, level)

    def _busy(self, conn: Connection, ms: int) -> None:
        """Set the busy timeout of the inline commits' connection to `ms`, unless it is set already."""
        if not self._inline or (conn is self._conn and self._busy_now == ms):
            return
        conn.execute(f"PRAGMA busy_timeout = {ms}")
        if conn is self._conn:
            self._busy_now = ms

    def _level(self, conn: Connection, items: list[_Item]) -> str | None:
        """The disk guarantee the transaction of `items` needs (the strongest its writers asked for),
        set on `conn` as far as it must be before BEGIN; None without `levels`."""
        levels = self._levels
        if levels is None:
            return None
        level = synchronous.strongest((item.level for item in items), levels.base)
        levels.before(conn, level)
        return level

    def _revived(self, conn: Connection) -> Connection:
        """`conn`, or a new connection in its place when it was lost (closing what is left of it)."""
        if self._lost is None or not self._lost(conn):
            return conn
        fresh = self._connect()  # raises when the server is still out of reach
        with contextlib.suppress(Exception):  # nothing to flush on a lost session
            conn.close()
        if self._inline:
            self._conn, self._busy_now = fresh, None
        log.warning("the connection to the state database was lost; the writer reconnected")
        return fresh

    def _commit(self, conn: Connection, items: list[_Item], level: str | None) -> list[_Result]:
        """Apply `items` in the transaction begun on `conn` (at `level`: see `_level`), and commit it."""
        levels = self._levels
        try:
            if levels is not None and level is not None:
                levels.inside(conn, level)
            results = self._apply_all(conn, items)
        except Exception:
            # some item failed: replay the batch with a savepoint per item, so only it fails
            try:
                conn.execute("ROLLBACK")
                # an inline commit's replay waits for the lock, as the writer thread's does
                self._busy(conn, self._busy_ms)
                conn.execute("BEGIN IMMEDIATE")
                if levels is not None and level is not None:
                    levels.inside(conn, level)
                results = [self._apply_one(conn, item) for item in items]
            except _TRANSACTION_ERRORS as exc:
                # another process took the lock in between, or the connection is gone (Postgres ends the
                # session of a process frozen in a transaction past IDLE_IN_TRANSACTION), maybe in the
                # middle of the replay: the batch fails whole, and the writer thread lives on to tell every
                # later waiter so, never hanging them (and to reconnect before the next batch)
                _roll_back(conn)
                return self._failed(items, exc)
        try:
            conn.execute("COMMIT")
        except _TRANSACTION_ERRORS as exc:
            # the commit itself failed (disk full, I/O error): nothing of the batch is stored
            _roll_back(conn)
            return self._failed(items, exc)
        self.commits += 1
        self.items += len(items)
        return results

    def _failed(self, items: list[_Item], exc: Exception) -> list[_Result]:
        error = self._explain(exc)
        return [(item, None, error) for item in items]

    @staticmethod
    def _apply_all(conn: Connection, items: list[_Item]) -> list[_Result]:
        # the fast path: no savepoints; lazy rows first, runs of mergeable rows merged per SQL
        results: list[_Result] = []
        writes = _Pending(conn)
        for item in items:
            if item.lazy:
                writes.merge(item.work)  # type: ignore[arg-type]
        writes.flush()
        for item in items:
            if item.lazy:
                results.append((item, None, None))
            elif callable(item.work):
                writes.send()
                results.append((item, item.work(conn), None))
            elif all(write.mergeable for write in item.work):
                writes.merge(item.work)
                results.append((item, None, None))
            else:
                writes.flush()
                writes.pending.extend(item.work)
                results.append((item, None, None))
        writes.send()
        return results

    @staticmethod
    def _apply_one(conn: Connection, item: _Item) -> _Result:
        if not item.work:
            return item, None, None
        conn.execute("SAVEPOINT item")
        try:
            if callable(item.work):
                value = item.work(conn)
            else:
                value = None
                for write in item.work:
                    _run(conn, write)
        except Exception as exc:
            conn.execute("ROLLBACK TO item")
            conn.execute("RELEASE item")
            if item.future is None:
                log.warning("a queued database write failed: %s", exc)
            return item, None, exc
        conn.execute("RELEASE item")
        return item, value, None

    @staticmethod
    def _deliver(results: list[_Result]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Any, Any, BaseException | None]]] = {}
        for item, value, exc in results:
            if item.future is None:
                continue
            if item.loop is None:
                future = item.future
                assert isinstance(future, concurrent.futures.Future)
                if exc is None:
                    future.set_result(value)
                else:
                    future.set_exception(exc)
            else:
                by_loop.setdefault(item.loop, []).append((item.future, value, exc))
        # one wake-up per event loop and batch, not one per waiter
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_settle, settled)


def _roll_back(conn: Connection) -> None:
    """End the transaction a failed batch left open, if any; a connection gone has nothing to roll back
    (even asking it whether it is in a transaction may fail)."""
    with contextlib.suppress(*_TRANSACTION_ERRORS):
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _busy_timeout(conn: Connection) -> int:
    """A SQLite connection's busy timeout in milliseconds (an inline commit sets it to 0: `_busy`)."""
    row = conn.execute("PRAGMA busy_timeout").fetchone()
    return int(row[0]) if row else 0


def _settle(settled: list[tuple[Any, Any, BaseException | None]]) -> None:
    for future, value, exc in settled:
        if future.done():  # the waiter was cancelled
            continue
        if exc is None:
            future.set_result(value)
        else:
            future.set_exception(exc)
