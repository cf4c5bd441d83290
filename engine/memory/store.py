"""Open the memory store on the yard's state database (shared with the checkpointer, WAL mode)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.store.sqlite import SqliteStore

from engine.dbfile import guard, open_database
from engine.memory.scope import history_namespace, preferences_namespace

LIST_LIMIT = 1000


def connect(path: Path) -> sqlite3.Connection:
    """A connection fit for several processes on one file."""
    return open_database(path)


@contextmanager
def open_store(path: Path) -> Iterator[SqliteStore]:
    """The store for the length of a block; a locked or damaged file is a clear `StateError`."""
    conn = connect(path)
    try:
        with guard(path):
            store = SqliteStore(conn)
            store.setup()
            yield store
    finally:
        conn.close()


def preferences(store: SqliteStore, scope: str) -> dict[str, Any]:
    """Every preference of a scope, key -> value."""
    items = store.search(preferences_namespace(scope), limit=LIST_LIMIT)
    return {item.key: item.value.get("value") for item in sorted(items, key=lambda i: i.key)}


def history(store: SqliteStore, scope: str, flow: str, limit: int = 20) -> list[dict[str, Any]]:
    """The newest `limit` history records of a flow in a scope, oldest first."""
    items = store.search(history_namespace(scope, flow), limit=LIST_LIMIT)
    items.sort(key=lambda i: i.created_at)
    return [item.value for item in items[-limit:]]
