"""A throw-away Postgres cluster for the tests: Debian's `initdb` and `pg_ctl` in a temporary folder.

One cluster per test process (each pytest-xdist worker starts its own: nothing is shared between
workers, so they never wait on each other), listening only on a Unix socket in its folder (no TCP
port to collide on), and a fresh database per test: cloned from a template with the cluster's
`CREATE DATABASE ... TEMPLATE` (~0.1 s of the server's time: it copies ~8 MB of catalogs), or a
database an earlier test was done with, recycled: renamed (whoever still knows the old name can no
longer reach it), checked to hold exactly the template's tables, columns, functions and rows, and its
tables that were written to emptied (~1 ms). A database whose check fails is dropped instead.

`initdb` refuses to run as root (a cluster owned by root would let SQL reach the superuser's
files), and CI runs as root: there the cluster is created and run as an unprivileged user —
`postgres` where Debian's package created it, else `nobody` — through `runuser`, and the folder
is handed to that user. The cluster needs a password (scram-sha-256), so the URLs the tests use
carry one, as real deployments' do: whatever masks it is tested on the real thing.

Durability is off (`fsync`, `synchronous_commit`, `full_page_writes`): a test cluster dies with
its test run, and a commit then costs what SQLite's costs in the suite. For the same reason the
password's SCRAM verifier is stretched with 1 iteration, not 4,096 (`scram_verifier`): the handshake
is the same, but each of the pass's thousands of connections costs ~3 ms less, client and server.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import hmac
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg.rows import TupleRow

from engine.state import pgsaver

USER = "blockyard"
PASSWORD = "s3cret-pg-pass"
TEMPLATE = "blockyard_template"
FOLDER_PREFIX = "blockyard-pg-"  # a cluster's folder in the temporary directory
OWNER = "owner"  # in the folder: the process id of the test process the cluster belongs to
BIN_DIRS = (
    "/usr/lib/postgresql/15/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/17/bin",
)


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


def scram_verifier(password: str, iterations: int = 1) -> str:
    """What Postgres stores for a SCRAM-SHA-256 password (RFC 5802/7677), stretched `iterations` times
    (Postgres 15 always takes 4,096; it accepts a verifier made with another count, and the client
    stretches as the server says). The test cluster's databases are thrown away: no stretching needed."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    stored = hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest()
    server = hmac.new(salted, b"Server Key", "sha256").digest()

    def text(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return f"SCRAM-SHA-256${iterations}:{text(salt)}${text(stored)}:{text(server)}"


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
    raise Unavailable(
        "running as root and no unprivileged user (postgres, nobody) to run initdb as"
    )


# How many databases a worker keeps cloned ahead of the tests that will ask for them, and how many
# discarded ones may wait to be dropped before `discard` waits for the dropper: together with the few
# something still holds open, what bounds the disk a pass uses (each database is ~8 MB; a pass uses ~600).
# A recycled database joins the ready ones while fewer than KEEP wait there, else it is dropped: quick
# tests hand theirs back in bursts, faster than one at a time, and the keeper clones only when fewer than
# READY are ready, so every database a pass uses is counted in these bounds.
READY = 2
MAX_DOOMED = 8
KEEP = READY + MAX_DOOMED
POLL = 0.2  # seconds between looks at databases still in use
# bytes (with indexes and out-of-line values) up to which a table is emptied by DELETE
SMALL_TABLE = 64 * 1024

# What a recycled database must share with the template (besides the rows of the template's non-empty
# tables): everything a test could have created, altered or set in it that emptying its tables does not undo.
# The system schemas are the cluster's own (the same in every database).
SHAPE = """
    SELECT 'rel', n.nspname, c.relname, c.relkind::text, coalesce(c.relacl::text, '')
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
    UNION ALL
    SELECT 'col', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
           a.attnotnull::text || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND a.attnum > 0
       AND NOT a.attisdropped
    UNION ALL
    SELECT 'con', c.conrelid::regclass::text, c.conname, c.contype::text, pg_get_constraintdef(c.oid)
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
    UNION ALL
    SELECT 'ns', nspname, '', '', coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname NOT LIKE 'pg_temp_%'
       AND nspname NOT LIKE 'pg_toast_temp_%'
    UNION ALL
    SELECT 'fn', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid), md5(p.prosrc)
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
    UNION ALL
    SELECT 'trg', tgrelid::regclass::text, tgname, '', '' FROM pg_trigger WHERE NOT tgisinternal
    UNION ALL
    SELECT 'ext', extname, extversion, '', '' FROM pg_extension
    UNION ALL
    SELECT 'type', n.nspname, t.typname, t.typtype::text, ''
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
    UNION ALL
    SELECT 'set', coalesce(s.setrole::text, ''), coalesce(s.setconfig::text, ''), '', ''
      FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()
    UNION ALL
    SELECT 'lob', count(*)::text, '', '', '' FROM pg_largeobject_metadata
    UNION ALL
    SELECT 'seq', n.nspname, c.relname, coalesce(pg_sequence_last_value(c.oid)::text, ''), ''
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'S'
    ORDER BY 1, 2, 3, 4, 5
"""
# The user tables, and which of them hold rows or ever did (an emptied table keeps its file pages: emptied again)
TABLES = """
    SELECT format('%I.%I', n.nspname, c.relname), pg_relation_size(c.oid) > 0 OR coalesce(
           (SELECT pg_relation_size(t.oid) > 0 FROM pg_class t WHERE t.oid = c.reltoastrelid), false)
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
     ORDER BY 1
"""


def _look(conn: psycopg.Connection[TupleRow]) -> tuple[list[tuple[object, ...]], dict[str, bool]]:
    """The database's shape (SHAPE) and its tables, each with whether it holds rows or dead ones."""
    shape = [tuple(row) for row in conn.execute(SHAPE).fetchall()]
    return shape, {str(row[0]): bool(row[1]) for row in conn.execute(TABLES).fetchall()}


def _rows(conn: psycopg.Connection[TupleRow], tables: list[str]) -> list[list[str]]:
    """The rows of `tables` (as text, sorted): the template's seeded ones, the migration versions."""
    return [
        sorted(str(row[0]) for row in conn.execute(f"SELECT t::text FROM {table} t").fetchall())
        for table in tables
    ]  # our own table names (_look quotes them)


@dataclass(frozen=True)
class Template:
    """What a recycled database is checked against: the template's shape, and the rows of the tables
    that hold some in it (left as they are; every other table is emptied if it was written to)."""

    shape: list[tuple[object, ...]]
    seeded: list[str]
    rows: list[list[str]]

    @classmethod
    def of(cls, conn: psycopg.Connection[TupleRow]) -> Template:
        shape, tables = _look(conn)
        seeded = [table for table, used in tables.items() if used]
        return cls(shape, seeded, _rows(conn, seeded))


@dataclass
class Cluster:
    """A running cluster: `url(name)` is a database's URL (with the password in it).

    Making, recycling and dropping the tests' databases happens on one background thread per cluster
    (the "keeper"), off the tests' own time: it keeps READY databases made ahead, and recycles or drops
    discarded databases as soon as nothing is connected to them (it asks `pg_stat_activity` first:
    `DROP DATABASE` or a rename of a database in use waits five seconds before it fails)."""

    folder: Path
    port: int
    pg_ctl: str
    prefix: list[str]
    template: Template | None = None  # None: discarded databases are dropped, never recycled
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _cond: threading.Condition = field(default_factory=threading.Condition)
    # URL -> name of the databases fresh_database made
    _made: dict[str, str] = field(default_factory=dict)
    # template clones made ahead, not handed out yet
    _ready: list[str] = field(default_factory=list)
    _doomed: list[str] = field(default_factory=list)  # discarded, not tried yet
    _dropping: list[str] = field(default_factory=list)  # discarded, being tried by the keeper now
    _held: list[str] = field(default_factory=list)  # discarded, still in use when last tried
    _failure: BaseException | None = None
    _stopping: bool = False
    _keeper: threading.Thread | None = None

    @property
    def socket_dir(self) -> Path:
        return self.folder

    def url(self, database: str) -> str:
        return (
            f"postgresql://{USER}:{quote(PASSWORD)}@/{database}"
            f"?host={quote(str(self.socket_dir))}&port={self.port}"
        )

    def execute(self, *statements: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # our own literal statements

    def fresh_database(self, *, empty: bool = False) -> str:
        """A new database, cloned from the template (Blockyard's and LangGraph's tables already
        migrated: a test starts as fast as on a new SQLite file), or `empty`; returns its URL."""
        if empty:
            name = self._name()
            self.execute(f"CREATE DATABASE {name} TEMPLATE template0")
        else:
            with self._cond:
                self._start_keeper()
                while not self._ready:
                    self._check()
                    self._cond.wait()
                name = self._ready.pop(0)
                self._cond.notify_all()  # the keeper makes the next one
        url = self.url(name)
        with self._cond:
            self._made[url] = name
        return url

    def discard(self, url: str) -> None:
        """The test that asked for `url` is over: its database is dropped once nothing uses it any
        more (a server a module-scoped fixture started during that test may hold it for a while).
        Waits only when the keeper is MAX_DOOMED databases behind."""
        with self._cond:
            name = self._made.pop(url, None)
            if name is None:
                return
            self._start_keeper()
            self._doomed.append(name)
            self._cond.notify_all()
            while len(self._doomed) > MAX_DOOMED:
                self._check()
                self._cond.wait()

    def pending(self) -> int:
        """How many discarded databases are not dropped yet (in use, or not reached yet)."""
        with self._cond:
            return len(self._doomed) + len(self._dropping) + len(self._held)

    def settle(self, timeout: float) -> None:
        """Wait (at most `timeout` seconds) until every discarded database nothing uses is dropped."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._doomed or self._dropping) and time.monotonic() < deadline:
                self._check()
                self._cond.wait(POLL)

    def _name(self) -> str:
        with self._cond:
            return f"t{os.getpid()}_{next(self._names)}"

    def _check(self) -> None:
        """Called with the lock held: the keeper's failure is the waiting test's error."""
        if self._failure is not None:
            raise RuntimeError(
                f"the Postgres test cluster's keeper failed: {self._failure!r}"
            ) from self._failure
        if self._keeper is None or not self._keeper.is_alive():
            raise RuntimeError("the Postgres test cluster's keeper is not running")

    def _start_keeper(self) -> None:
        if self._keeper is None:
            self._keeper = threading.Thread(target=self._keep, name="postgres-keeper", daemon=True)
            self._keeper.start()

    def _keep(self) -> None:
        try:
            with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
                while True:
                    with self._cond:
                        while not (self._stopping or self._doomed or len(self._ready) < READY):
                            self._cond.wait(POLL if self._held else None)
                            if self._held:
                                break  # time for another look at the databases in use
                        if self._stopping:
                            return
                        self._dropping = self._doomed + self._held
                        self._doomed, self._held = [], []
                        doomed = list(self._dropping)
                    held = self._recycle(conn, doomed)
                    with self._cond:
                        make = len(self._ready) < READY
                    if make:  # one at a time: a discard waiting on the doomed list goes first
                        name = self._name()
                        conn.execute(
                            f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY"
                        )
                    with self._cond:
                        self._dropping = []
                        self._held.extend(held)
                        if make:
                            self._ready.append(name)
                        self._cond.notify_all()
        except BaseException as exc:  # handed to the test that waits next (_check)
            with self._cond:
                self._failure = exc
                self._cond.notify_all()

    def _recycle(self, conn: psycopg.Connection[TupleRow], names: list[str]) -> list[str]:
        """Make ready again those of `names` nothing is connected to, while fewer than KEEP are ready,
        and drop the others nothing is connected to; returns those in use (tried again later)."""
        if not names:
            return []
        rows = conn.execute(
            "SELECT DISTINCT datname FROM pg_stat_activity WHERE datname = ANY(%s)", [names]
        ).fetchall()
        in_use = {str(row[0]) for row in rows}
        held = [name for name in names if name in in_use]
        for name in names:
            if name in in_use:
                continue
            with self._cond:
                room = self.template is not None and len(self._ready) < KEEP
            if room:
                fresh = self._name()
                try:  # first, so that whatever still knows the old name (a server a test left) cannot reach it
                    # our own names (t<pid>_<n>)
                    conn.execute(f"ALTER DATABASE {name} RENAME TO {fresh}")
                except psycopg.errors.ObjectInUse:  # connected to since we looked
                    held.append(name)
                    continue
                name = fresh
            if not room or not self._clean(name):
                try:
                    conn.execute(f"DROP DATABASE IF EXISTS {name}")
                except psycopg.errors.ObjectInUse:  # connected to since we looked
                    held.append(name)
                continue
            with self._cond:
                self._ready.append(name)
                self._cond.notify_all()
        return held

    def _clean(self, name: str) -> bool:
        """Empty the tables a test wrote to in `name`, if its shape and seeded rows are still the
        template's (False: it differs, drop it)."""
        assert self.template is not None
        with psycopg.connect(self.url(name), autocommit=True) as conn:
            shape, tables = _look(conn)
            if (
                shape != self.template.shape
                or _rows(conn, self.template.seeded) != self.template.rows
            ):
                return False
            written = [
                table
                for table, used in tables.items()
                if used and table not in self.template.seeded
            ]
            if written:
                # Most tests leave a few rows: those tables are emptied with DELETE, as TRUNCATE makes new
                # files for every table and index (~40 ms of the server's time per database, a third of its
                # CPU in the pass). A bigger one is truncated: what a test measures of its database's size
                # (tests/support/state.py, stored_bytes) may differ from a clone's by SMALL_TABLE per table
                # at most, never by what an earlier test stored. Foreign keys are not checked while deleting
                # (session_replication_role): every table holding rows is among `written`, and TRUNCATE's
                # CASCADE takes the tables that refer to a big one.
                sizes = conn.execute(
                    "SELECT t, pg_total_relation_size(t::regclass) FROM unnest(%s::text[]) t",
                    [written],
                ).fetchall()
                big = [str(table) for table, size in sizes if int(size) > SMALL_TABLE]
                with conn.transaction():
                    conn.execute("SET LOCAL session_replication_role = replica")
                    for table in written:  # names as _look quoted them
                        if table not in big:
                            conn.execute(f"DELETE FROM {table}")
                    if big:
                        conn.execute(f"TRUNCATE {', '.join(big)} CASCADE")
                # no seeded table among those
                return _rows(conn, self.template.seeded) == self.template.rows
        return True

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._keeper is not None:
            self._keeper.join(timeout=10)
        subprocess.run(
            [*self.prefix, self.pg_ctl, "stop", "-D", str(self.folder / "data"), "-m", "immediate"],
            capture_output=True,
            check=False,
            timeout=60,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> Cluster:
    """Create and start a cluster in a new temporary folder; stopped and removed at exit."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise Unavailable(
            "Postgres is not installed (no initdb/pg_ctl; `apt-get install postgresql`, "
            "as .ci/run does)"
        )
    prefix = _run_as()
    remove_stale(Path(tempfile.gettempdir()), pg_ctl, prefix)
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    folder.chmod(0o755)
    # remove_stale: whose cluster this is
    (folder / OWNER).write_text(f"{os.getpid()}\n", encoding="utf-8")
    pwfile = folder / "pw"
    pwfile.write_text(PASSWORD + "\n", encoding="utf-8")
    if prefix:
        owner = pwd.getpwnam(prefix[2])
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        os.chown(pwfile, owner.pw_uid, owner.pw_gid)
    data = folder / "data"
    _checked(
        [
            *prefix,
            initdb,
            "-D",
            str(data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        "initdb",
    )
    pwfile.unlink()
    # a port for the socket's name only (no TCP): unique per worker process, retried if taken
    for attempt in range(20):
        port = 20000 + (os.getpid() * 7 + attempt * 131) % 40000
        if (folder / f".s.PGSQL.{port}").exists():
            continue
        options = (
            f"-c listen_addresses='' -c unix_socket_directories={folder} -p {port} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
            "-c shared_buffers=32MB"
        )
        result = subprocess.run(
            [
                *prefix,
                pg_ctl,
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(folder / "log"),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=90,
        )
        if result.returncode == 0:
            break
    else:
        log = (folder / "log").read_text(errors="replace") if (folder / "log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log[-2000:]}")
    cluster = Cluster(folder, port, pg_ctl, prefix)
    atexit.register(cluster.stop)
    # base64 and hex: nothing to quote in the literal
    cluster.execute(
        f"ALTER ROLE {USER} PASSWORD '{scram_verifier(PASSWORD)}'", f"CREATE DATABASE {TEMPLATE}"
    )
    pgsaver.open_writer(
        cluster.url(TEMPLATE)
    ).close()  # every migration, once for all the tests' databases
    with psycopg.connect(cluster.url(TEMPLATE), autocommit=True) as conn:
        cluster.template = Template.of(conn)  # what a recycled database is checked against
    return cluster


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _pid(path: Path) -> int | None:
    """The process id on the first line of `path` (an owner file, a postmaster.pid), if it has one."""
    try:
        first = path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def remove_stale(parent: Path, pg_ctl: str, prefix: list[str]) -> list[Path]:
    """Stop and remove the clusters killed test runs left in `parent` (a run killed with -9 never
    runs its atexit `stop`): only folders named like ours whose test process (its OWNER file) is
    gone — their postmaster, if still running, is stopped first — and, from before OWNER files,
    folders whose postmaster is gone. A folder of a live run, or one we cannot tell, is left alone.
    Returns the folders removed."""
    removed: list[Path] = []
    for folder in sorted(parent.glob(f"{FOLDER_PREFIX}*")):
        if not folder.is_dir() or folder.is_symlink():
            continue
        owner = _pid(folder / OWNER)
        postmaster = _pid(folder / "data" / "postmaster.pid")
        if owner is not None:
            if _alive(owner):
                continue
            if postmaster is not None and _alive(postmaster):
                subprocess.run(
                    [*prefix, pg_ctl, "stop", "-D", str(folder / "data"), "-m", "immediate"],
                    capture_output=True,
                    check=False,
                    timeout=60,
                )
                if (folder / "data" / "postmaster.pid").exists():
                    continue  # not stopped: leave it
        elif postmaster is None or _alive(postmaster):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


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
