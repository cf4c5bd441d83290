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
