from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.dbfile import open_database

CHILD = """
import sys, time
from pathlib import Path
from engine.dbfile import open_database
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
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), start],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0] * 6, [err for _, err in results]
    assert [out.strip() for out, _ in results] == ["wal"] * 6
    assert open_database(path).execute("SELECT count(*) FROM t").fetchone()[0] == 6
