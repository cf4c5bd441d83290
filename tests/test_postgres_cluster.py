"""The suite's throw-away Postgres cluster (tests/support/postgres.py): a test's database is recycled
(renamed, its written tables emptied) or dropped without holding up the next test, even while
something still uses it; a recycled one is as clean as a new clone, and one whose tables, columns or
migration rows a test changed is dropped instead; the databases waiting stay bounded (a pass uses
~600 of ~8 MB), and a cluster a killed test run left behind is stopped and removed by the next run —
only ours, only when its run is gone."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO, postgres_cluster, test_backend
from tests.support import postgres


def _cluster() -> postgres.Cluster:
    if test_backend() != "postgres":
        pytest.skip("about the Postgres test cluster: run in the Postgres pass (.ci/test)")
    return postgres_cluster()


def _ours(cluster: postgres.Cluster) -> set[str]:
    with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", [f"t{os.getpid()}\\_%"]
        )
        return {str(row[0]) for row in rows.fetchall()}


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_database_still_in_use_holds_up_no_later_test_and_is_let_go_once_released() -> None:
    cluster = _cluster()
    held_url = cluster.fresh_database()
    held = psycopg.connect(held_url, autocommit=True)  # a server started during that test, say
    try:
        cluster.discard(held_url)
        started = time.monotonic()
        # DROP DATABASE on a database in use waits 5 s: three tests would wait 15 s
        for _ in range(3):
            cluster.discard(cluster.fresh_database())
        assert time.monotonic() - started < 5.0
        cluster.settle(30)
        assert held_url.split("@/")[1].split("?")[0] in _ours(cluster)
    finally:
        held.close()
    deadline = time.monotonic() + 30
    while cluster.pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cluster.pending() == 0
    # recycled under a new name, or dropped
    assert held_url.split("@/")[1].split("?")[0] not in _ours(cluster)


def _oid(cluster: postgres.Cluster, url: str) -> int:
    """The database's oid: what a rename keeps."""
    with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT oid FROM pg_database WHERE datname = %s", [url.split("@/")[1].split("?")[0]]
        )
        return int(row.fetchone()[0])  # type: ignore[index]


def _by_oid(cluster: postgres.Cluster) -> dict[int, str]:
    with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT oid, datname FROM pg_database WHERE datname LIKE %s", [f"t{os.getpid()}\\_%"]
        )
        return {int(row[0]): str(row[1]) for row in rows.fetchall()}


def _counts(cluster: postgres.Cluster, name: str) -> dict[str, int]:
    """Rows per user table."""
    with psycopg.connect(cluster.url(name), autocommit=True) as conn:
        tables = [str(row[0]) for row in conn.execute(postgres.TABLES).fetchall()]
        return {
            table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
            for table in tables
        }


def test_a_recycled_database_is_as_clean_as_a_new_clone_and_a_changed_one_is_dropped() -> None:
    cluster = _cluster()
    new = cluster.fresh_database()
    clean = _counts(cluster, new.split("@/")[1].split("?")[0])
    used, altered, reseeded = (
        cluster.fresh_database(),
        cluster.fresh_database(),
        cluster.fresh_database(),
    )
    with psycopg.connect(
        used, autocommit=True
    ) as conn:  # what a test leaves: rows, some in TOAST, some deleted
        conn.execute(
            "INSERT INTO definitions VALUES ('d', 'f', 1, %s, 'now')", [os.urandom(40_000).hex()]
        )
        conn.execute(
            "INSERT INTO threads (id, flow, title, created, updated) VALUES ('t', 'f', 'x', 'a', 'b')"
        )
        conn.execute("DELETE FROM threads")
    with psycopg.connect(altered, autocommit=True) as conn:
        conn.execute("ALTER TABLE runs ADD COLUMN extra integer")
    with psycopg.connect(reseeded, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM blockyard_migrations WHERE version = (SELECT max(version) FROM blockyard_migrations)"
        )
    oids = {url: _oid(cluster, url) for url in (new, used, altered, reseeded)}
    for url in (used, altered, reseeded):
        cluster.discard(url)
    cluster.settle(30)
    now = _by_oid(cluster)
    assert oids[used] in now and now[oids[used]] not in used  # the same database, under a new name
    # every table as in a new clone: the migrations' rows only
    assert _counts(cluster, now[oids[used]]) == clean
    assert any(count for count in clean.values())
    # not the template's any more: dropped
    assert oids[altered] not in now and oids[reseeded] not in now
    cluster.discard(new)


def test_the_databases_waiting_to_be_dropped_stay_bounded() -> None:
    cluster = _cluster()
    most = 0
    for _ in range(postgres.MAX_DOOMED + 4):
        url = cluster.fresh_database()
        cluster.discard(url)
        most = max(most, len(_ours(cluster)))
    # made ahead, waiting to be recycled or dropped, the one being made, this test's own
    assert most <= postgres.READY + postgres.MAX_DOOMED + 2
    cluster.settle(30)
    assert len(_ours(cluster)) <= postgres.KEEP  # the ones ready for the next tests


def _folder(parent: Path, name: str, owner: int | None, postmaster: int | None) -> Path:
    folder = parent / name
    (folder / "data").mkdir(parents=True)
    if owner is not None:
        (folder / postgres.OWNER).write_text(f"{owner}\n", encoding="utf-8")
    if postmaster is not None:
        (folder / "data" / "postmaster.pid").write_text(
            f"{postmaster}\n/some/data\n", encoding="utf-8"
        )
    return folder


def test_only_our_folders_of_runs_that_are_gone_are_removed(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getpid()
    gone = _folder(tmp_path, "blockyard-pg-gone", owner=dead, postmaster=dead)
    stopped = _folder(tmp_path, "blockyard-pg-stopped", owner=dead, postmaster=None)
    # before owner files
    older = _folder(tmp_path, "blockyard-pg-older", owner=None, postmaster=dead)
    kept = [
        _folder(tmp_path, "blockyard-pg-running", owner=alive, postmaster=alive),
        _folder(tmp_path, "blockyard-pg-starting", owner=alive, postmaster=None),
        _folder(tmp_path, "blockyard-pg-older-running", owner=None, postmaster=alive),
        # initdb under way, maybe
        _folder(tmp_path, "blockyard-pg-unknown", owner=None, postmaster=None),
        _folder(tmp_path, "someone-else", owner=dead, postmaster=dead),
    ]
    removed = postgres.remove_stale(tmp_path, "pg_ctl", [])
    assert sorted(removed) == sorted([gone, stopped, older])
    assert [folder.exists() for folder in kept] == [True] * len(kept)
    assert not gone.exists() and not stopped.exists() and not older.exists()


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_cluster_left_running_by_a_killed_run_is_stopped_and_removed() -> None:
    _cluster()
    pg_ctl = postgres._binary("pg_ctl")
    assert pg_ctl is not None
    # a folder of its own in /tmp (the cluster's user must reach it: pytest's tmp_path is root's only)
    parent = Path(tempfile.mkdtemp(prefix="blockyard-stale-test-"))
    parent.chmod(0o755)
    try:
        script = (
            "import sys; from tests.support import postgres; c = postgres.cluster(); "
            "print(c.folder, flush=True); sys.stdin.read()"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(parent)},
        )
        assert child.stdout is not None
        folder = Path(child.stdout.readline().strip())
        child.send_signal(signal.SIGKILL)  # no atexit: the cluster keeps running
        child.wait()
        postmaster = int((folder / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
        assert folder.parent == parent and _running(postmaster)
        assert postgres.remove_stale(parent, pg_ctl, postgres._run_as()) == [folder]
        assert not folder.exists()
        deadline = time.monotonic() + 10
        while _running(postmaster) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(postmaster)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_the_password_is_checked_by_scram_with_a_verifier_stretched_once() -> None:
    cluster = _cluster()
    with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = %s", [postgres.USER]
        ).fetchone()
    assert row is not None and str(row[0]).startswith("SCRAM-SHA-256$1:")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            cluster.url("postgres").replace(f":{postgres.PASSWORD}@", ":not-the-password@")
        ).close()
