"""Moving a yard's state from its SQLite file to Postgres (`blockyard db copy --to URL`).

The copy is one transaction on the target: everything arrives, or nothing does. Blockyard's tables
are copied row by row; checkpoints go through the checkpointers (SQLite's saver reads and
deserializes them, the Postgres saver stores them in its own layout — inline values and blobs),
with their pending writes, so a run that was waiting for an approval, or a conversation thread,
goes on on Postgres from where it stopped. The memory store's rows keep their times (a flow's
history is read oldest first). A target that already holds runs is refused: a copy never mixes two
yards' state.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from engine.core.errors import UsageError
from engine.state.backends import count_rows as _count
from engine.state.checkpointer import StateDB
from engine.state.compact import Decompressing
from engine.state.database import Connection, Native
from engine.state.memory import TEXT_KEY, pack, unpack

# Blockyard's tables in the order their keys need them, with their columns (as of migrations.SCHEMA_VERSION)
TABLES: dict[str, tuple[str, ...]] = {
    "definitions": ("digest", "flow", "version", "bundle", "created"),
    "runs": (
        "id",
        "flow",
        "version",
        "digest",
        "status",
        "inputs",
        "outputs",
        "error",
        "error_step",
        "thread_id",
        "parent",
        "owner_pid",
        "owner_host",
        "owner_start",
        "created",
        "started",
        "finished",
        "duration",
        "owner_replica",
        "lease_until",
        "durability",
        "output_dir",
        "trace",
        "model_calls",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "reasoning_tokens",
        "cost_usd",
        "unpriced_calls",
        "budget",
        "traceparent",
        "after_turn",
        "regenerates",
    ),
    "events": ("run_id", "seq", "type", "step", "time", "data"),
    "gates": (
        "run_id",
        "interrupt_id",
        "gate",
        "step",
        "status",
        "request",
        "created",
        "timeout_at",
        "decided",
        "actor",
        "decision",
    ),
    "threads": (
        "id",
        "flow",
        "title",
        "created",
        "updated",
        "turns",
        "last_run",
        "name",
        "checkpoint",
        "metadata",
        "branched",
        "inputs",
    ),
    "messages": ("thread_id", "idx", "role", "content", "run_id", "created"),
    "serve_schedules": ("flow", "schedule", "first_seen", "last_fire", "last_run"),
    "inline_steps": ("thread_id", "checkpoint_ns", "seq", "next", "type", "value"),
    "eval_results": (
        "id",
        "eval",
        "target",
        "digest",
        "version",
        "side",
        "label",
        "revision",
        "created",
        "cases",
        "passed",
        "pass_rate",
        "mean_score",
        "cost_usd",
        "unpriced_calls",
        "tokens",
        "latency_ms",
        "ok",
        "results",
    ),
}
_STORE_COLUMNS = ("prefix", "key", "value", "created_at", "updated_at", "expires_at", "ttl_minutes")


# ---- copying ------------------------------------------------------------------------------------


def copy(source: sqlite3.Connection, target: StateDB) -> dict[str, int]:
    """Copy everything of a SQLite state database (`source`, migrated) into the Postgres one that
    `target` has open, in one transaction; returns how many rows of each kind were copied."""
    if target.location.url is None:
        raise UsageError("db copy: the target must be a Postgres database (postgresql://...)")
    saver = SqliteSaver(source, serde=Decompressing())  # a finished run's checkpoint is compressed
    checkpoints = list(saver.list(None)) if _sqlite_table(source, "checkpoints") else []
    memory = (
        [
            (prefix, key, _memory_text(prefix, value), *rest)
            for prefix, key, value, *rest in source.execute(
                f"SELECT {', '.join(_STORE_COLUMNS)} FROM store"
            )
        ]
        if _sqlite_table(source, "store")
        else []
    )
    rows = {
        table: source.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
        for table, columns in TABLES.items()
        if _sqlite_table(source, table)
    }
    pg_saver = target.saver

    def apply(conn: Connection) -> dict[str, int]:
        taken = _count(conn, "runs")
        if taken:
            raise UsageError(
                f"db copy: {target.location} already holds {taken} run(s); copy into an empty database"
            )
        copied: dict[str, int] = {}
        for table, found in rows.items():
            columns = TABLES[table]
            _insert(
                conn,
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                found,
            )
            copied[table] = len(found)
        for item in checkpoints:
            conf = item.config["configurable"]
            parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            config: Any = {
                "configurable": {
                    "thread_id": conf["thread_id"],
                    "checkpoint_ns": conf["checkpoint_ns"],
                    "checkpoint_id": parent,
                }
            }
            writes, saved = pg_saver._checkpoint_writes(
                config, item.checkpoint, item.metadata, item.checkpoint["channel_versions"]
            )
            by_task: dict[str, list[tuple[str, Any]]] = {}
            for task_id, channel, value in item.pending_writes or []:
                by_task.setdefault(task_id, []).append((channel, value))
            writes += [
                pg_saver._writes_write(saved, pending, task_id, "")
                for task_id, pending in by_task.items()
            ]
            for write in writes:
                if write.many:
                    conn.executemany(write.sql, write.params)
                else:
                    conn.execute(write.sql, write.params)
        copied["checkpoints"] = len(checkpoints)
        _insert(
            conn,
            Native(
                "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) "
                "VALUES (%s, %s, %s::jsonb, %s::timestamp AT TIME ZONE 'UTC', "
                "%s::timestamp AT TIME ZONE 'UTC', %s::timestamp AT TIME ZONE 'UTC', %s) "
                "ON CONFLICT (prefix, key) DO NOTHING"
            ),
            memory,
        )
        copied["memory"] = len(memory)
        return copied

    result: dict[str, int] = target.writer.call_sync(apply)
    return result


def _memory_text(prefix: str, value: str | bytes) -> str:
    """A memory item's JSON text for Postgres's store: an item written before values were kept as
    their JSON text (engine/state/memory.py, `pack`) is packed now, so its keys keep their order."""
    text = value.decode("utf-8") if isinstance(value, bytes) else value
    stored = json.loads(text)
    if isinstance(stored, dict) and len(stored) == 1 and isinstance(stored.get(TEXT_KEY), str):
        return text
    return json.dumps(
        pack(unpack(stored, preference=prefix.endswith(".preferences"))), ensure_ascii=False
    )


def _sqlite_table(conn: sqlite3.Connection, table: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        is not None
    )


def _insert(conn: Connection, sql: str, rows: Iterable[Any]) -> None:
    found = list(rows)
    if found:
        conn.executemany(sql, found)
