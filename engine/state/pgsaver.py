"""LangGraph's Postgres checkpointer (`PostgresSaver`: its tables, its reads) on the group-commit
writer, and the start of a Postgres state database (`prepare`: every migration, once).

Writes are `PostgresSaver.put`'s statements, built here and committed by the writer like the
SQLite saver's (engine/state/checkpointer.py, `GroupCommitted`): they share transactions with the
run's own rows, and a conversation turn's reply checkpoint is committed in the transaction that
writes its `messages` (`held`). API keys are masked in what is stored: the serialized blobs
(lengths kept) and the checkpoint's inline values and metadata, which Postgres keeps as JSONB.

Reads go through the reader connection, which the saver shares with its `StateDB` (`read`). A
session the server ended (a restart, a failover; engine/state/postgres.py) is replaced before the
next read, and a read it failed is tried once more on the new session: reads change nothing, so
running one again is safe. The writer replaces its own connection (engine/state/writer.py, `lost`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.store.postgres import PostgresStore
from psycopg.types.json import Jsonb

from engine.core.events import now_iso
from engine.core.redaction import Masker
from engine.state import inline_steps, postgres
from engine.state.database import Connection, Native
from engine.state.durable import GroupCommitted
from engine.state.postgres import PgConnection
from engine.state.writer import SqliteWriter, Write

log = logging.getLogger(__name__)

T = TypeVar("T")
_THREAD_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def prepare(conn: PgConnection) -> None:
    """LangGraph's tables (checkpointer, store) and ours, migrated; safe when servers start at once."""
    with postgres.setup_lock(conn):
        PostgresSaver(conn.raw).setup()
        PostgresStore(conn.raw).setup()
    postgres.migrate(conn, now_iso())


def open_writer(url: str, session: Callable[[Connection], None] | None = None) -> PgConnection:
    """The writer thread's connection, with the database prepared (at start, and again whenever the
    writer reconnects: engine/state/writer.py, `lost`) and `session` applied (its settings)."""
    conn = postgres.connect(url)
    try:
        prepare(conn)
        if session is not None:
            session(conn)
    except (
        psycopg.Error
    ) as exc:  # LangGraph's setup speaks psycopg: a session lost meanwhile is a StateError
        conn.close()
        raise postgres.explained(exc, url) from None
    except BaseException:
        conn.close()
        raise
    return conn


def lost(conn: Connection) -> bool:
    """Whether the writer's connection lost its session (`SqliteWriter(lost=...)`): it reconnects."""
    return isinstance(conn, PgConnection) and conn.broken


class PgDurableSaver(GroupCommitted, PostgresSaver):
    """PostgresSaver's tables and reads (on the reader connection, reopened when its session was
    lost: see the module's docstring), with writes committed by the group-commit writer."""

    def __init__(
        self,
        read_conn: PgConnection,
        writer: SqliteWriter,
        *,
        serde: SerializerProtocol | None = None,
        secrets: Masker | None = None,
    ) -> None:
        PostgresSaver.__init__(self, read_conn.raw, serde=serde)
        self.read_conn = read_conn
        self._sessions = 0  # reader sessions replaced so far (see `_reading`)
        self._start_group_commit(writer, secrets)

    def _checkpoint_writes(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[list[Write], RunnableConfig]:
        # PostgresSaver.put, as statements: primitive channel values stay inline in the checkpoint's
        # JSONB, the others go to checkpoint_blobs under their version
        conf = config["configurable"]
        thread_id, checkpoint_ns = str(conf["thread_id"]), str(conf["checkpoint_ns"])
        copy: dict[str, Any] = dict(checkpoint)
        copy["channel_values"] = dict(copy["channel_values"])
        blob_values = {}
        for key, value in checkpoint["channel_values"].items():
            if isinstance(value, _DeltaSnapshot):  # a snapshot's blob, marked inline by `true`
                blob_values[key] = copy["channel_values"].pop(key)
                copy["channel_values"][key] = True
            elif value is not None and not isinstance(value, str | int | float | bool):
                blob_values[key] = copy["channel_values"].pop(key)
        writes: list[Write] = []
        if blob_versions := {k: v for k, v in new_versions.items() if k in blob_values}:
            rows = [
                (*row[:5], self.secrets.blob(row[5]) if row[5] is not None else None)
                for row in self._dump_blobs(thread_id, checkpoint_ns, blob_values, blob_versions)
            ]
            writes.append(
                Write(Native(self.UPSERT_CHECKPOINT_BLOBS_SQL), rows, many=True, mergeable=True)
            )
        meta = get_serializable_checkpoint_metadata(config, metadata)
        writes.append(
            Write(
                Native(self.UPSERT_CHECKPOINTS_SQL),
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    conf.get("checkpoint_id"),
                    Jsonb(self.secrets.value(copy)),
                    Jsonb(self.secrets.value(meta)),
                ),
                mergeable=True,
            )
        )
        saved: RunnableConfig = {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        return writes, saved

    def _writes_write(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Write:
        conf = config["configurable"]
        # special channels (errors, interrupts) replace earlier rows; ordinary writes never do
        query = (
            self.UPSERT_CHECKPOINT_WRITES_SQL
            if all(w[0] in WRITES_IDX_MAP for w in writes)
            else self.INSERT_CHECKPOINT_WRITES_SQL
        )
        rows = [
            (*row[:8], self.secrets.blob(row[8]))
            for row in self._dump_writes(
                str(conf["thread_id"]),
                str(conf["checkpoint_ns"]),
                str(conf["checkpoint_id"]),
                task_id,
                task_path,
                writes,
            )
        ]
        return Write(Native(query), rows, many=True, mergeable=True)

    def delete_thread_writes(self, thread_id: str) -> list[Write]:
        return [
            *(
                Write(Native(f"DELETE FROM {table} WHERE thread_id = %s"), (str(thread_id),))
                for table in _THREAD_TABLES
            ),
            inline_steps.delete(thread_id),
        ]

    def prune_writes(self, thread_id: str, keep: str) -> list[Write]:
        where = "WHERE thread_id = %s AND NOT (checkpoint_ns = '' AND checkpoint_id = %s)"
        return [
            Write(Native(f"DELETE FROM checkpoint_writes {where}"), (thread_id, keep)),
            Write(Native(f"DELETE FROM checkpoints {where}"), (thread_id, keep)),
            _unreferenced_blobs(thread_id),
            inline_steps.delete(thread_id),
        ]

    def prune_finished(self, thread_id: str) -> list[Write]:
        where = (
            f"WHERE thread_id = %s AND NOT (checkpoint_ns = '' AND checkpoint_id = {_LAST_ROOT})"
        )
        return [
            Write(Native(f"DELETE FROM checkpoint_writes {where}"), (thread_id, thread_id)),
            Write(Native(f"DELETE FROM checkpoints {where}"), (thread_id, thread_id)),
            _unreferenced_blobs(thread_id),
            inline_steps.delete(thread_id),
        ]

    def prune_stopped(self, thread_id: str) -> list[Write]:
        where = f"WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id < {_LAST_ROOT}"
        return [
            Write(Native(f"DELETE FROM checkpoint_writes {where}"), (thread_id, thread_id)),
            Write(Native(f"DELETE FROM checkpoints {where}"), (thread_id, thread_id)),
            _unreferenced_blobs(thread_id),
        ]

    # ---- reads on a live session (below the builders above: from here on `list` names the method) -----

    def read(self, fn: Callable[[PgConnection], T]) -> T:
        """`fn(reader connection)` under `lock`, on a live session (StateDB.read)."""
        with self.lock:
            return self._reading(lambda: fn(self.read_conn), locked=True)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._reading(lambda: PostgresSaver.get_tuple(self, config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # PostgresSaver's reads all its rows before it yields the first checkpoint: that much is tried again
        def first() -> tuple[CheckpointTuple | None, Iterator[CheckpointTuple]]:
            found = PostgresSaver.list(self, config, filter=filter, before=before, limit=limit)
            return next(found, None), found

        head, rest = self._reading(first)
        if head is not None:
            yield head
            yield from rest

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._reading(
            lambda: PostgresSaver.get_delta_channel_history(self, config=config, channels=channels)
        )

    def _reading(self, fn: Callable[[], T], *, locked: bool = False) -> T:
        """`fn()`, a read on the reader connection: a session lost before it is replaced first, and one
        lost during it is replaced and `fn` called once more (a read changes nothing). `locked`: the
        caller holds `lock`; else `fn` takes it itself (PostgresSaver's reads, in `_cursor`)."""
        with self._holding(locked):
            self._revive()
            session = self._sessions
        try:
            return fn()
        except Exception:
            with self._holding(locked):
                self._revive()  # a server still out of reach: its StateError, caused by the read's error
                if self._sessions == session:  # the session was not lost: the read's own error
                    raise
        return fn()

    def _holding(self, locked: bool) -> AbstractContextManager[Any]:
        return contextlib.nullcontext() if locked else self.lock

    def _revive(self) -> None:
        """With `lock` held: a new reader session in place of a lost one (PgConnection.reopen)."""
        if not self.read_conn.broken:
            return
        self.read_conn.reopen()
        self.conn = self.read_conn.raw  # what PostgresSaver's `_cursor` reads through
        self._sessions += 1
        log.warning("the connection to the state database was lost; the reader reconnected")


# the checkpoint a thread goes on from: PostgresSaver reads the greatest id (ids are time-ordered UUIDs)
_LAST_ROOT = (
    "(SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '')"
)


def _unreferenced_blobs(thread_id: str) -> Write:
    """Deleting the blobs of a thread no kept checkpoint refers to (by channel and version)."""
    return Write(
        Native(
            "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS ("
            "SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
            "AND c.checkpoint_ns = b.checkpoint_ns "
            "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
        ),
        (thread_id,),
    )
