"""LangGraph's Postgres checkpointer (`PostgresSaver`: its tables, its reads) on the group-commit
writer, and the start of a Postgres state database (`prepare`: every migration, once).

Writes are `PostgresSaver.put`'s statements, built here and committed by the writer like the
SQLite saver's (engine/state/checkpointer.py, `GroupCommitted`): they share transactions with the
run's own rows, and a conversation turn's reply checkpoint is committed in the transaction that
writes its `messages` (`held`). API keys are masked in what is stored: the serialized blobs
(lengths kept) and the checkpoint's inline values and metadata, which Postgres keeps as JSONB.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.store.postgres import PostgresStore
from psycopg.types.json import Jsonb

from engine.events import now_iso
from engine.redaction import Masker
from engine.state import inline_steps, postgres
from engine.state.database import Native
from engine.state.durable import GroupCommitted
from engine.state.postgres import PgConnection
from engine.state.writer import SqliteWriter, Write

_THREAD_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def prepare(conn: PgConnection) -> None:
    """LangGraph's tables (checkpointer, store) and ours, migrated; safe when servers start at once."""
    with postgres.setup_lock(conn):
        PostgresSaver(conn.raw).setup()
        PostgresStore(conn.raw).setup()
    postgres.migrate(conn, now_iso())


def open_writer(url: str) -> PgConnection:
    """The writer thread's connection, with the database prepared."""
    conn = postgres.connect(url)
    try:
        prepare(conn)
    except BaseException:
        conn.close()
        raise
    return conn


class PgDurableSaver(GroupCommitted, PostgresSaver):
    """PostgresSaver's tables and reads (on the reader connection), with writes committed by the
    group-commit writer."""

    def __init__(self, read_conn: PgConnection, writer: SqliteWriter, *,
                 serde: SerializerProtocol | None = None, secrets: Masker | None = None) -> None:
        PostgresSaver.__init__(self, read_conn.raw, serde=serde)
        self._start_group_commit(writer, secrets)

    def _checkpoint_writes(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                           new_versions: ChannelVersions) -> tuple[list[Write], RunnableConfig]:
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
            rows = [(*row[:5], self.secrets.blob(row[5]) if row[5] is not None else None)
                    for row in self._dump_blobs(thread_id, checkpoint_ns, blob_values, blob_versions)]
            writes.append(Write(Native(self.UPSERT_CHECKPOINT_BLOBS_SQL), rows, many=True, mergeable=True))
        meta = get_serializable_checkpoint_metadata(config, metadata)
        writes.append(Write(Native(self.UPSERT_CHECKPOINTS_SQL),
                            (thread_id, checkpoint_ns, checkpoint["id"], conf.get("checkpoint_id"),
                             Jsonb(self.secrets.value(copy)), Jsonb(self.secrets.value(meta))), mergeable=True))
        saved: RunnableConfig = {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": checkpoint_ns,
                                                  "checkpoint_id": checkpoint["id"]}}
        return writes, saved

    def _writes_write(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                      task_path: str) -> Write:
        conf = config["configurable"]
        # special channels (errors, interrupts) replace earlier rows; ordinary writes never do
        query = (self.UPSERT_CHECKPOINT_WRITES_SQL if all(w[0] in WRITES_IDX_MAP for w in writes)
                 else self.INSERT_CHECKPOINT_WRITES_SQL)
        rows = [(*row[:8], self.secrets.blob(row[8]))
                for row in self._dump_writes(str(conf["thread_id"]), str(conf["checkpoint_ns"]),
                                             str(conf["checkpoint_id"]), task_id, task_path, writes)]
        return Write(Native(query), rows, many=True, mergeable=True)

    def delete_thread_writes(self, thread_id: str) -> list[Write]:
        return [*(Write(Native(f"DELETE FROM {table} WHERE thread_id = %s"), (str(thread_id),))
                  for table in _THREAD_TABLES), inline_steps.delete(thread_id)]

    def prune_writes(self, thread_id: str, keep: str) -> list[Write]:
        where = "WHERE thread_id = %s AND NOT (checkpoint_ns = '' AND checkpoint_id = %s)"
        return [Write(Native(f"DELETE FROM checkpoint_writes {where}"), (thread_id, keep)),
                Write(Native(f"DELETE FROM checkpoints {where}"), (thread_id, keep)),
                _unreferenced_blobs(thread_id), inline_steps.delete(thread_id)]

    def prune_finished(self, thread_id: str) -> list[Write]:
        where = f"WHERE thread_id = %s AND NOT (checkpoint_ns = '' AND checkpoint_id = {_LAST_ROOT})"
        return [Write(Native(f"DELETE FROM checkpoint_writes {where}"), (thread_id, thread_id)),
                Write(Native(f"DELETE FROM checkpoints {where}"), (thread_id, thread_id)),
                _unreferenced_blobs(thread_id), inline_steps.delete(thread_id)]

    def prune_stopped(self, thread_id: str) -> list[Write]:
        where = f"WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id < {_LAST_ROOT}"
        return [Write(Native(f"DELETE FROM checkpoint_writes {where}"), (thread_id, thread_id)),
                Write(Native(f"DELETE FROM checkpoints {where}"), (thread_id, thread_id)),
                _unreferenced_blobs(thread_id)]


# the checkpoint a thread goes on from: PostgresSaver reads the greatest id (ids are time-ordered UUIDs)
_LAST_ROOT = "(SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '')"


def _unreferenced_blobs(thread_id: str) -> Write:
    """Deleting the blobs of a thread no kept checkpoint refers to (by channel and version)."""
    return Write(Native("DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS ("
                        "SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
                        "AND c.checkpoint_ns = b.checkpoint_ns "
                        "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"), (thread_id,))
