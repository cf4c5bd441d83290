"""A throw-away Postgres cluster for the tests: Debian's `initdb` and `pg_ctl` in a temporary folder.

One cluster per test process (each pytest-xdist worker starts its own: nothing is shared between
workers, so they never wait on each other), listening only on a Unix socket in its folder (no TCP
port to collide on), and a fresh database per test, cloned from a template with the cluster's
`CREATE DATABASE ... TEMPLATE` (a file copy: a few milliseconds).

`initdb` refuses to run as root (a cluster owned by root would let SQL reach the superuser's
files), and CI runs as root: there the cluster is created and run as an unprivileged user —
`postgres` where Debian's package created it, else `nobody` — through `runuser`, and the folder
is handed to that user. The cluster needs a password (scram-sha-256), so the URLs the tests use
carry one, as real deployments' do: whatever masks it is tested on the real thing.

Durability is off (`fsync`, `synchronous_commit`, `full_page_writes`): a test cluster dies with
its test run, and a commit then costs what SQLite's costs in the suite.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import psycopg

from engine.state import pgsaver

USER = "blockyard"
PASSWORD = "s3cret-pg-pass"
TEMPLATE = "blockyard_template"
BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin")


class Unavailable(RuntimeError):
    """Postgres cannot be started here (not installed); the tests say so (tests/conftest.skip_or_fail)."""


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in BIN_DIRS:
        candidate = Path(folder) / name
        if candidate.exists():
            return str(candidate)
    return None


def _run_as() -> list[str]:
    """The command prefix that runs the server's tools as an unprivileged user (empty unless root)."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"]
    raise Unavailable("running as root and no unprivileged user (postgres, nobody) to run initdb as")


@dataclass
class Cluster:
    """A running cluster: `url(name)` is a database's URL (with the password in it)."""

    folder: Path
    port: int
    pg_ctl: str
    prefix: list[str]
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _made: dict[str, str] = field(default_factory=dict)  # URL -> name of the databases fresh_database made
    _unused: list[str] = field(default_factory=list)  # names of databases to drop once nobody uses them

    @property
    def socket_dir(self) -> Path:
        return self.folder

    def url(self, database: str) -> str:
        return (f"postgresql://{USER}:{quote(PASSWORD)}@/{database}"
                f"?host={quote(str(self.socket_dir))}&port={self.port}")

    def execute(self, *statements: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # our own literal statements

    def fresh_database(self, *, empty: bool = False) -> str:
        """A new database, cloned from the template (Blockyard's and LangGraph's tables already
        migrated: a test starts as fast as on a new SQLite file), or `empty`; returns its URL."""
        with self._lock:
            name = f"t{os.getpid()}_{next(self._names)}"
        self.execute(f"CREATE DATABASE {name} TEMPLATE {'template0' if empty else TEMPLATE} STRATEGY FILE_COPY")
        url = self.url(name)
        with self._lock:
            self._made[url] = name
        return url

    def discard(self, url: str) -> None:
        """The test that asked for `url` is over: drop its database — and any discarded earlier that
        was still in use then. A database something still holds a connection to (a server a
        module-scoped fixture started during that test) stays until a later call finds it free:
        each database costs ~8 MB, and a whole pass makes ~1,800 of them."""
        with self._lock:
            name = self._made.pop(url, None)
            if name is not None:
                self._unused.append(name)
            waiting, self._unused = self._unused, []
        still: list[str] = []
        for pending in waiting:
            try:
                self.execute(f"DROP DATABASE IF EXISTS {pending}")
            except psycopg.errors.ObjectInUse:
                still.append(pending)
        with self._lock:
            self._unused.extend(still)

    def stop(self) -> None:
        subprocess.run([*self.prefix, self.pg_ctl, "stop", "-D", str(self.folder / "data"), "-m", "immediate"],
                       capture_output=True, check=False, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> Cluster:
    """Create and start a cluster in a new temporary folder; stopped and removed at exit."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise Unavailable("Postgres is not installed (no initdb/pg_ctl; `apt-get install postgresql`, "
                          "as .ci/run does)")
    prefix = _run_as()
    folder = Path(tempfile.mkdtemp(prefix="blockyard-pg-"))
    folder.chmod(0o755)
    pwfile = folder / "pw"
    pwfile.write_text(PASSWORD + "\n", encoding="utf-8")
    if prefix:
        owner = pwd.getpwnam(prefix[2])
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        os.chown(pwfile, owner.pw_uid, owner.pw_gid)
    data = folder / "data"
    _checked([*prefix, initdb, "-D", str(data), "-U", USER, f"--pwfile={pwfile}", "--auth=scram-sha-256",
              "-E", "UTF8", "--locale=C", "--no-sync"], "initdb")
    pwfile.unlink()
    # a port for the socket's name only (no TCP): unique per worker process, retried if taken
    for attempt in range(20):
        port = 20000 + (os.getpid() * 7 + attempt * 131) % 40000
        if (folder / f".s.PGSQL.{port}").exists():
            continue
        options = (f"-c listen_addresses='' -c unix_socket_directories={folder} -p {port} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                   "-c shared_buffers=32MB")
        result = subprocess.run([*prefix, pg_ctl, "start", "-w", "-t", "60", "-D", str(data), "-o", options,
                                 "-l", str(folder / "log")], capture_output=True, text=True, check=False,
                                timeout=90)
        if result.returncode == 0:
            break
    else:
        log = (folder / "log").read_text(errors="replace") if (folder / "log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log[-2000:]}")
    cluster = Cluster(folder, port, pg_ctl, prefix)
    atexit.register(cluster.stop)
    cluster.execute(f"CREATE DATABASE {TEMPLATE}")
    pgsaver.open_writer(cluster.url(TEMPLATE)).close()  # every migration, once for all the tests' databases
    return cluster


def _checked(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}): {result.stderr or result.stdout}")


_cluster: Cluster | None = None
_cluster_lock = threading.Lock()


def cluster() -> Cluster:
    """This process's cluster, started on first use (raises Unavailable without Postgres)."""
    global _cluster
    with _cluster_lock:
        if _cluster is None:
            _cluster = start()
        return _cluster
