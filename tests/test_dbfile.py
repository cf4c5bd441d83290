from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.errors import UsageError
from engine.state.database import (
    TIMEOUT_ENV,
    StateLocked,
    busy_timeout,
    explain,
    guard,
    open_database,
)

CHILD = """
import sys, time
from pathlib import Path
from engine.state.database import open_database
start = float(sys.argv[2])
while time.time() < start:
    pass
conn = open_database(Path(sys.argv[1]))
conn.execute("CREATE TABLE IF NOT EXISTS t (pid INTEGER)")
conn.execute("INSERT INTO t VALUES (?)", (len(sys.argv),))
print(conn.execute("PRAGMA journal_mode").fetchone()[0])
"""


def test_processes_creating_a_fresh_database_at_once_all_get_wal(tmp_path: Path) -> None:
    import time

    path = tmp_path / "fresh" / "state.db"
    start = str(time.time() + 1.0)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    results = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0] * 6, [err for _, err in results]
    assert [out.strip() for out, _ in results] == ["wal"] * 6
    assert open_database(path).execute("SELECT count(*) FROM t").fetchone()[0] == 6


def test_only_failures_of_the_file_itself_become_state_errors(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    conn = open_database(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="syntax error"), guard(path):
            conn.execute("SELEC 1")  # a wrong statement is a bug: it stays one (exit 4, with a log)
        with (
            pytest.raises(sqlite3.IntegrityError, match=r"UNIQUE constraint failed: t.id"),
            guard(path),
        ):
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            conn.execute("INSERT INTO t VALUES (1), (1)")
    finally:
        conn.close()
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
    locked = explain(busy, path)
    assert isinstance(locked, StateLocked) and str(locked).startswith(
        f"the state database {path} is locked"
    )
    locked.command = "memory set"
    assert str(locked).startswith(
        f"memory set: the state database {path} is locked by another process (waited 30 s"
    )


def test_the_lock_wait_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert busy_timeout() == 30.0
    monkeypatch.setenv(TIMEOUT_ENV, " 0.25 ")
    assert busy_timeout() == 0.25
    monkeypatch.setenv(TIMEOUT_ENV, "0")
    assert busy_timeout() == 0.0
    monkeypatch.setenv(TIMEOUT_ENV, "a while")
    with pytest.raises(
        UsageError, match="BLOCKYARD_DB_TIMEOUT='a while': expected a number of seconds"
    ):
        busy_timeout()
