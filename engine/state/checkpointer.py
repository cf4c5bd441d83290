"""The state database of a process: connections tuned for several processes on one file, and a
LangGraph checkpointer whose writes go through the group-commit writer.

Durability: WAL mode with `synchronous=NORMAL`. A commit is in the WAL (in the OS page cache)
before it is acknowledged, so a crash of the process (kill -9, OOM, Ctrl-C) loses nothing that
was acknowledged; only a power cut or kernel panic can drop the last transactions, which SQLite
then rolls back cleanly. `synchronous="FULL"` (the yard's, or a flow's for its runs' transactions:
engine/state/synchronous.py) survives those too.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from engine.core.events import now_iso
from engine.core.redaction import Masker
from engine.state import compact, inline_steps, migrations
from engine.state import synchronous as levels
from engine.state.database import Connection, explain, guard, open_database
from engine.state.durable import GroupCommitted
from engine.state.location import Location
from engine.state.writer import SqliteWriter, Write

if TYPE_CHECKING:
    from engine.state.pgsaver import PgDurableSaver

T = TypeVar("T")

_PUT_CHECKPOINT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_PUT_WRITES = (
    "INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, "
    "type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def connect(path: Path, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, waiting on busy locks."""
    return open_database(path, synchronous=levels.checked(synchronous))


def prepare(conn: sqlite3.Connection) -> None:
    """Create the checkpointer's tables and migrate ours (idempotent, safe across processes)."""
    SqliteSaver(conn).setup()
    migrations.migrate(conn, now_iso())


class DurableSaver(GroupCommitted, SqliteSaver):
    """SqliteSaver's tables and reads, with writes committed by a `SqliteWriter`.

    Works from any event loop and any thread: async reads run on a private reader thread, and
    every write (async or sync) returns only once its transaction is committed.
    """

    def __init__(
        self,
        read_conn: sqlite3.Connection,
        writer: SqliteWriter,
        *,
        serde: SerializerProtocol | None = None,
        secrets: Masker | None = None,
    ) -> None:
        SqliteSaver.__init__(self, read_conn, serde=compact.Decompressing(serde))
        self._start_group_commit(writer, secrets)
        self.is_setup = True  # prepare() created the tables through the writer's connection

    def _checkpoint_writes(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[list[Write], RunnableConfig]:
        conf = config["configurable"]
        thread_id, checkpoint_ns = conf["thread_id"], conf["checkpoint_ns"]
        type_, blob = self.serde.dumps_typed(checkpoint)
        blob = self.secrets.blob(blob)
        meta = self.secrets.blob(
            json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode(
                "utf-8", "ignore"
            )
        )
        write = Write(
            _PUT_CHECKPOINT,
            (
                str(thread_id),
                checkpoint_ns,
                checkpoint["id"],
                conf.get("checkpoint_id"),
                type_,
                blob,
                meta,
            ),
            mergeable=True,
        )
        saved: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        return [write], saved

    def _writes_write(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Write:
        conf = config["configurable"]
        # special channels (errors, interrupts) replace earlier rows; ordinary writes never do
        verb = (
            "INSERT OR REPLACE "
            if all(w[0] in WRITES_IDX_MAP for w in writes)
            else "INSERT OR IGNORE "
        )
        rows = [
            (
                str(conf["thread_id"]),
                str(conf["checkpoint_ns"]),
                str(conf["checkpoint_id"]),
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                *self._serialized(value),
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        return Write(verb + _PUT_WRITES, rows, many=True, mergeable=True)

    def _serialized(self, value: Any) -> tuple[str, bytes]:
        type_, blob = self.serde.dumps_typed(value)
        return type_, self.secrets.blob(blob)

    def delete_thread_writes(self, thread_id: str) -> list[Write]:
        return [
            Write("DELETE FROM checkpoints WHERE thread_id = ?", (str(thread_id),)),
            Write("DELETE FROM writes WHERE thread_id = ?", (str(thread_id),)),
            inline_steps.delete(thread_id),
        ]

    def prune_writes(self, thread_id: str, keep: str) -> list[Write]:
        where = "WHERE thread_id = ? AND NOT (checkpoint_ns = '' AND checkpoint_id = ?)"
        return [
            Write(f"DELETE FROM writes {where}", (thread_id, keep)),
            Write(f"DELETE FROM checkpoints {where}", (thread_id, keep)),
            inline_steps.delete(thread_id),
        ]

    def prune_finished(self, thread_id: str) -> list[Write]:
        where = f"WHERE thread_id = ? AND NOT (checkpoint_ns = '' AND checkpoint_id = {_LAST_ROOT})"
        return [
            Write(f"DELETE FROM writes {where}", (thread_id, thread_id)),
            Write(f"DELETE FROM checkpoints {where}", (thread_id, thread_id)),
            inline_steps.delete(thread_id),
            # the one kept, compressed (engine/state/compact.py)
            Write(
                f"UPDATE checkpoints SET type = type || '{compact.COMPRESSED}', "
                f"checkpoint = {compact.SQL_FUNCTION}(checkpoint) "
                f"WHERE thread_id = ? AND type NOT LIKE '%{compact.COMPRESSED}'",
                (thread_id,),
            ),
        ]

    def prune_stopped(self, thread_id: str) -> list[Write]:
        where = f"WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id < {_LAST_ROOT}"
        return [
            Write(f"DELETE FROM writes {where}", (thread_id, thread_id)),
            Write(f"DELETE FROM checkpoints {where}", (thread_id, thread_id)),
        ]


# the checkpoint a thread goes on from: SqliteSaver reads the greatest id (ids are time-ordered UUIDs)
_LAST_ROOT = (
    "(SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '')"
)


class StateDB:
    """A process's handle on the state database: one writer, one reader, one saver.

    `where` is the SQLite file (`<root>/.blockyard/state.db`, a Path) or a `Location` (either
    backend: engine/state/location.py). One per process and database is the rule (one write
    connection means commits are grouped rather than fighting over the lock); it is usable from
    any thread and any event loop.
    """

    def __init__(
        self,
        where: Path | Location,
        *,
        synchronous: str = "NORMAL",
        window: float = 0.0,
        secrets: Masker | None = None,
    ) -> None:
        self.location = where if isinstance(where, Location) else Location(where)
        self.path = self.location.path
        self.saver: GroupCommitted
        self.read_conn: Connection
        self._postgres: PgDurableSaver | None = (
            None  # the saver again, on Postgres: reads on a live session
        )
        if self.location.url is not None:
            self._open_postgres(self.location.url, synchronous, window, secrets)
        else:
            self._open_sqlite(self.path, synchronous, window, secrets)
        self._closed = False

    def _open_sqlite(
        self, path: Path, synchronous: str, window: float, secrets: Masker | None
    ) -> None:
        with guard(path):  # a damaged file may show only once the tables are read
            # inline commits (a lone run's checkpoints committed on its own thread: writer.py, `write`)
            # only where a commit does not wait for the disk: with FULL or EXTRA each one is an fsync,
            # which would stall the event loop
            self.writer = SqliteWriter(
                lambda: self._open_writer(synchronous),
                window=window,
                explain=lambda exc: explain(exc, path) or exc,
                inline=levels.weak(levels.checked(synchronous)),
                levels=levels.SqliteLevels(synchronous),
            )
            try:
                read_conn = connect(path, synchronous=synchronous)
            except BaseException:
                self.writer.close()
                raise
        self.read_conn = read_conn
        self.saver = DurableSaver(read_conn, self.writer, secrets=secrets)

    def _open_postgres(
        self, url: str, synchronous: str, window: float, secrets: Masker | None
    ) -> None:
        # psycopg and LangGraph's Postgres checkpointer: loaded only for a Postgres database
        from engine.state.pgsaver import PgDurableSaver, lost, open_writer
        from engine.state.postgres import connect as connect_postgres  # (psycopg, as above)

        # a session the server ended (a restart, a failover) is replaced: the writer's before its next
        # batch (`lost`), the reader's before its next read (PgDurableSaver.read)
        # the yard's disk guarantee is the writer session's synchronous_commit; a transaction of a flow
        # that asks for another sets its own (engine/state/synchronous.py)
        commits = levels.PostgresLevels(synchronous)
        self.writer = SqliteWriter(
            lambda: open_writer(url, commits.session), window=window, lost=lost, levels=commits
        )
        try:
            read_conn = connect_postgres(url)
        except BaseException:
            self.writer.close()
            raise
        self.read_conn = read_conn
        self.saver = self._postgres = PgDurableSaver(read_conn, self.writer, secrets=secrets)

    def _open_writer(self, synchronous: str) -> sqlite3.Connection:
        conn = connect(self.path, synchronous=synchronous)
        try:
            compact.register(conn)
            prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run a read on the reader connection (thread-safe; serialized with the saver's reads). On
        Postgres a lost session is replaced first, and a read it failed is run once more on the new one."""
        if self._postgres is not None:
            return self._postgres.read(fn)
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
