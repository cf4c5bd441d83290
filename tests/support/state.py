"""The state database of a test's yard, as the test looks into it: the SQLite file, or this test's
Postgres database when the suite runs on Postgres (tests/conftest.py) — one helper, both backends."""

from __future__ import annotations

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


def stored_bytes(root: Path) -> int:
    """How much the yard's state database holds: the SQLite file's size, or on Postgres the size of
    the database's tables (with their indexes and out-of-line values)."""
    location = locate(state_file(root))
    if location.url is None:
        return location.path.stat().st_size
    with state_db(root) as conn:
        row = conn.execute("SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0) FROM pg_stat_user_tables")
        return int(row.fetchone()[0])
