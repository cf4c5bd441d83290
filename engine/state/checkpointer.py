"""The state database of a process: connections tuned for several processes on one file, and a
LangGraph checkpointer whose writes go through the group-commit writer.

Durability: WAL mode with `synchronous=NORMAL`. A commit is in the WAL (in the OS page cache)
before it is acknowledged, so a crash of the process (kill -9, OOM, Ctrl-C) loses nothing that
was acknowledged; only a power cut or kernel panic can drop the last transactions, which SQLite
then rolls back cleanly. Use `synchronous="FULL"` where that matters too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from engine.events import now_iso
from engine.redaction import Masker
from engine.state import store
from engine.state.database import Connection, explain, guard, open_database
from engine.state.location import Location
from engine.state.writer import SqliteWriter, Write

T = TypeVar("T")
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

# While set (see `DurableSaver.held`), checkpoint writes of this task are collected here instead of
# committed: the caller commits them together with other rows, in one transaction.
_HELD: contextvars.ContextVar[list[Write] | None] = contextvars.ContextVar("blockyard_held_writes", default=None)

_PUT_CHECKPOINT = ("INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                   "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)")
_PUT_WRITES = ("INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, "
               "type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")


def connect(path: Path, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, waiting on busy locks."""
    if synchronous.upper() not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS)}")
    return open_database(path, synchronous=synchronous.upper())


def prepare(conn: sqlite3.Connection) -> None:
    """Create the checkpointer's tables and migrate ours (idempotent, safe across processes)."""
    SqliteSaver(conn).setup()
    store.migrate(conn, now_iso())


class GroupCommitted:
    """What a checkpointer on the group-commit writer does whatever the backend: writes through
    `writer` (held back inside `held`), async reads on a private reader thread, and the two
    shortcuts of a run's start (`expect_new`, `aread_for_start`). A subclass builds the backend's
    statements (`_checkpoint_writes`, `_writes_write`, `_delete_thread_writes`, `prune_writes`)
    and answers the sync reads (`get_tuple`, `list`, `get_delta_channel_history`)."""

    writer: SqliteWriter
    secrets: Masker
    lock: threading.Lock  # the backend saver's: reads on the reader connection take it

    def _start_group_commit(self, writer: SqliteWriter, secrets: Masker | None) -> None:
        # the last line of defence for API keys (engine/redaction.py): whatever state still holds
        # one is masked in the serialized bytes, lengths kept
        self.secrets = secrets if secrets is not None else Masker()
        self.writer = writer
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="blockyard-reader")
        self._fresh: set[str] = set()  # threads known to have no checkpoint yet
        self._handoff: dict[tuple[str, str], CheckpointTuple] = {}  # see `aread_for_start`

    def expect_new(self, thread_id: str) -> None:
        """Declare that `thread_id` has no checkpoint (a run that was just created): its first
        read is answered without a query — 500 runs starting at once would otherwise queue
        500 reads on the reader thread before any of them can take a step."""
        self._fresh.add(thread_id)

    def close(self) -> None:
        self._reader.shutdown(wait=True)

    @staticmethod
    @contextlib.contextmanager
    def held() -> Iterator[list[Write]]:
        """Collect the checkpoint writes made inside the block (in this task) instead of committing
        them: a conversation turn's reply checkpoint is committed in the transaction that ends the
        run, with its rows in `messages` (engine/runtime/turns.py)."""
        writes: list[Write] = []
        token = _HELD.set(writes)
        try:
            yield writes
        finally:
            _HELD.reset(token)

    async def _read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader, lambda: fn(*args, **kwargs))

    # ---- what a backend builds ----------------------------------------------------------------

    def _checkpoint_writes(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                           new_versions: ChannelVersions) -> tuple[list[Write], RunnableConfig]:
        raise NotImplementedError

    def _writes_write(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                      task_path: str) -> Write:
        raise NotImplementedError

    def _delete_thread_writes(self, thread_id: str) -> list[Write]:
        raise NotImplementedError

    def prune_writes(self, thread_id: str, keep: str) -> list[Write]:
        """Statements deleting every checkpoint (and pending write) of a thread but its root
        checkpoint `keep`: a finished turn's thread needs only that one (engine/state/threads.py)."""
        raise NotImplementedError

    if TYPE_CHECKING:  # the backend's saver (SqliteSaver, PostgresSaver) answers these; declared for mypy
        def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None: ...

        def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                 before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]: ...

        def get_delta_channel_history(self, *, config: RunnableConfig,
                                      channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]: ...

    # ---- writes -----------------------------------------------------------------------------

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        self._fresh.discard(str(config["configurable"]["thread_id"]))
        writes, saved = self._checkpoint_writes(config, checkpoint, metadata, new_versions)
        self.writer.write_sync(*writes)
        return saved

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        self._fresh.discard(str(config["configurable"]["thread_id"]))
        writes, saved = self._checkpoint_writes(config, checkpoint, metadata, new_versions)
        held = _HELD.get()
        if held is not None:
            held.extend(writes)
        else:
            await self.writer.write(*writes)
        return saved

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        self.writer.write_sync(self._writes_write(config, writes, task_id, task_path))

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        # LangGraph never waits for these (it submits them in the background and waits for the
        # checkpoint instead), so neither do we: queued now, committed with or before the next
        # checkpoint, which is awaited — the queue is executed in order.
        held = _HELD.get()
        if held is not None:
            held.append(self._writes_write(config, writes, task_id, task_path))
        else:
            self.writer.write_nowait(self._writes_write(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self.writer.write_sync(*self._delete_thread_writes(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await self.writer.write(*self._delete_thread_writes(thread_id))

    # ---- reads ------------------------------------------------------------------------------
    async def aread_for_start(self, thread_id: str, checkpoint_id: str) -> CheckpointTuple | None:
        """Read the checkpoint a conversation turn is about to start from, and hand it to the graph's
        own read of the same checkpoint, once: deserializing a long conversation is the dearest part
        of a turn's start (checkpoints never change once written, and only this one read reuses it)."""
        found = await self._read(self.get_tuple, {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                                                   "checkpoint_id": checkpoint_id}})
        if found is not None:
            if len(self._handoff) > 64:  # turns that never started (an error in between)
                self._handoff.clear()
            self._handoff[(thread_id, checkpoint_id)] = found
        return found

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        if conf.get("checkpoint_id") and not conf.get("checkpoint_ns"):
            handed = self._handoff.pop((str(conf.get("thread_id")), str(conf["checkpoint_id"])), None)
            if handed is not None:
                return handed
        if (str(conf.get("thread_id")) in self._fresh and not conf.get("checkpoint_ns")
                and not conf.get("checkpoint_id")):
            return None
        return await self._read(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await self._read(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in found:
            yield item

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return await self._read(self.get_delta_channel_history, config=config, channels=channels)




class DurableSaver(GroupCommitted, SqliteSaver):
    """SqliteSaver's tables and reads, with writes committed by a `SqliteWriter`.

    Works from any event loop and any thread: async reads run on a private reader thread, and
    every write (async or sync) returns only once its transaction is committed.
    """

    def __init__(self, read_conn: sqlite3.Connection, writer: SqliteWriter, *,
                 serde: SerializerProtocol | None = None, secrets: Masker | None = None) -> None:
        SqliteSaver.__init__(self, read_conn, serde=serde)
        self._start_group_commit(writer, secrets)
        self.is_setup = True  # prepare() created the tables through the writer's connection

    def _checkpoint_writes(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                           new_versions: ChannelVersions) -> tuple[list[Write], RunnableConfig]:
        conf = config["configurable"]
        thread_id, checkpoint_ns = conf["thread_id"], conf["checkpoint_ns"]
        type_, blob = self.serde.dumps_typed(checkpoint)
        blob = self.secrets.blob(blob)
        meta = self.secrets.blob(json.dumps(get_checkpoint_metadata(config, metadata),
                                            ensure_ascii=False).encode("utf-8", "ignore"))
        write = Write(_PUT_CHECKPOINT, (str(thread_id), checkpoint_ns, checkpoint["id"], conf.get("checkpoint_id"),
                                        type_, blob, meta), mergeable=True)
        saved: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns,
                                                  "checkpoint_id": checkpoint["id"]}}
        return [write], saved

    def _writes_write(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                      task_path: str) -> Write:
        conf = config["configurable"]
        # special channels (errors, interrupts) replace earlier rows; ordinary writes never do
        verb = "INSERT OR REPLACE " if all(w[0] in WRITES_IDX_MAP for w in writes) else "INSERT OR IGNORE "
        rows = [(str(conf["thread_id"]), str(conf["checkpoint_ns"]), str(conf["checkpoint_id"]), task_id, task_path,
                 WRITES_IDX_MAP.get(channel, idx), channel, *self._serialized(value))
                for idx, (channel, value) in enumerate(writes)]
        return Write(verb + _PUT_WRITES, rows, many=True, mergeable=True)

    def _serialized(self, value: Any) -> tuple[str, bytes]:
        type_, blob = self.serde.dumps_typed(value)
        return type_, self.secrets.blob(blob)

    def _delete_thread_writes(self, thread_id: str) -> list[Write]:
        return [Write("DELETE FROM checkpoints WHERE thread_id = ?", (str(thread_id),)),
                Write("DELETE FROM writes WHERE thread_id = ?", (str(thread_id),))]

    def prune_writes(self, thread_id: str, keep: str) -> list[Write]:
        where = "WHERE thread_id = ? AND NOT (checkpoint_ns = '' AND checkpoint_id = ?)"
        return [Write(f"DELETE FROM writes {where}", (thread_id, keep)),
                Write(f"DELETE FROM checkpoints {where}", (thread_id, keep))]

class StateDB:
    """A process's handle on the state database: one writer, one reader, one saver.

    `where` is the SQLite file (`<root>/.blockyard/state.db`, a Path) or a `Location` (either
    backend: engine/state/location.py). One per process and database is the rule (one write
    connection means commits are grouped rather than fighting over the lock); it is usable from
    any thread and any event loop.
    """

    def __init__(self, where: Path | Location, *, synchronous: str = "NORMAL", window: float = 0.0,
                 secrets: Masker | None = None) -> None:
        self.location = where if isinstance(where, Location) else Location(where)
        self.path = self.location.path
        self.saver: GroupCommitted
        self.read_conn: Connection
        if self.location.url is not None:
            self._open_postgres(self.location.url, window, secrets)
        else:
            self._open_sqlite(self.path, synchronous, window, secrets)
        self._closed = False

    def _open_sqlite(self, path: Path, synchronous: str, window: float, secrets: Masker | None) -> None:
        with guard(path):  # a damaged file may show only once the tables are read
            self.writer = SqliteWriter(lambda: self._open_writer(synchronous), window=window,
                                       explain=lambda exc: explain(exc, path) or exc)
            try:
                read_conn = connect(path, synchronous=synchronous)
            except BaseException:
                self.writer.close()
                raise
        self.read_conn = read_conn
        self.saver = DurableSaver(read_conn, self.writer, secrets=secrets)

    def _open_postgres(self, url: str, window: float, secrets: Masker | None) -> None:
        # psycopg and LangGraph's Postgres checkpointer: loaded only for a Postgres database
        from engine.state import pgsaver, postgres

        self.writer = SqliteWriter(lambda: pgsaver.open_writer(url), window=window)
        try:
            read_conn = postgres.connect(url)
        except BaseException:
            self.writer.close()
            raise
        self.read_conn = read_conn
        self.saver = pgsaver.PgDurableSaver(read_conn, self.writer, secrets=secrets)

    def _open_writer(self, synchronous: str) -> sqlite3.Connection:
        conn = connect(self.path, synchronous=synchronous)
        try:
            prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run a read on the reader connection (thread-safe; serialized with the saver's reads)."""
        with self.saver.lock:
            return fn(self.read_conn)

    async def aread(self, fn: Callable[[Connection], T]) -> T:
        return await self.saver._read(self.read, fn)

    def close(self) -> None:
        """Commit what is queued and close both connections."""
        if self._closed:
            return
        self._closed = True
        self.writer.close()
        self.saver.close()
        self.read_conn.close()
