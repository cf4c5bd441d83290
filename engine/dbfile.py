"""Opening the yard's state database: one way, fit for several processes on one file."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

BUSY_TIMEOUT = 30.0  # seconds a writer waits for another process's lock


def open_database(path: Path, *, autocommit: bool = True, synchronous: str | None = None) -> sqlite3.Connection:
    """A connection in WAL mode that waits on busy locks; usable from any thread.

    `autocommit` leaves transactions to explicit BEGIN/COMMIT (sqlite3's isolation_level=None);
    otherwise the sqlite3 module's implicit transactions apply (`with conn:`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False,
                           isolation_level=None if autocommit else "DEFERRED")
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        _enable_wal(conn)
        if synchronous is not None:
            conn.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


def _enable_wal(conn: sqlite3.Connection) -> None:
    # Switching to WAL needs an exclusive lock and SQLite does not wait for it through the busy
    # handler: two processes creating a fresh database at once would see "database is locked".
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(0.005 + random.random() * 0.02)
