"""The state database of a test's yard, as the test looks into it: the SQLite file, or this test's
Postgres database when the suite runs on Postgres (tests/conftest.py) — one helper, both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.state import backends
from engine.state.database import Connection
from engine.state.location import locate


def state_file(root: Path) -> Path:
    return root / ".blockyard" / "state.db"


@contextmanager
def state_db(root: Path) -> Iterator[Connection]:
    """A connection to the yard's state database (autocommit: each statement commits), closed after."""
    conn = backends.open_existing(locate(state_file(root)))
    assert conn is not None, f"no state database for {root}"
    try:
        yield conn
    finally:
        conn.close()


def checkpoint_tables(root: Path) -> tuple[str, ...]:
    """The tables LangGraph's checkpointer keeps a thread's checkpoints in, on the yard's backend."""
    if locate(state_file(root)).url is None:
        return ("checkpoints", "writes")
    return ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def stored_bytes(root: Path) -> int:
    """How much the yard's state database holds: the SQLite file's size, or on Postgres the size of
    the database's tables (with their indexes and out-of-line values)."""
    location = locate(state_file(root))
    if location.url is None:
        return location.path.stat().st_size
    with state_db(root) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0) FROM pg_stat_user_tables"
        )
        return int(row.fetchone()[0])


def database_bytes(root: Path) -> bytes:
    """Everything the yard's state database stores, as bytes to search: the SQLite file (with its WAL),
    or on Postgres every row of every table, blobs as they are and other values as text."""
    location = locate(state_file(root))
    if location.url is None:
        files = sorted(location.path.parent.glob(location.path.name + "*"))
        assert files, "no state database"
        return b"".join(path.read_bytes() for path in files)
    parts: list[bytes] = []
    with state_db(root) as conn:
        tables = [
            row[0]
            for row in conn.execute("SELECT relname FROM pg_stat_user_tables ORDER BY relname")
        ]
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        parts.append(bytes(value))
                    elif value is not None:
                        parts.append(
                            json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
                        )
    return b"\n".join(parts)
