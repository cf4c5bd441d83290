"""Our own tables in the state database: runs, their event trace, and the definitions they ran.

The checkpointer's tables are for the engine; these are for people (`blockyard runs`, the
server's pages). Plain sqlite3, schema versioned by `blockyard_migrations`. Writes are built here
as `Write` statements and committed by the group-commit writer; reads take a connection.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from engine.events import STORED_STATUSES, Event, RunStatus, now_iso
from engine.state import database, liveness
from engine.state.database import Connection, Native, StateError
from engine.state.liveness import Owner
from engine.state.writer import Call, Write

STATUSES = STORED_STATUSES
# the key of the advisory lock under which servers count running runs (`start_queued`): arbitrary, fixed
ADMISSION_LOCK = 0x626C6F636B79 + 2

# Each migration is a list of statements applied in one transaction, never edited once released.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, [
        """CREATE TABLE definitions (
            digest TEXT PRIMARY KEY,
            flow TEXT NOT NULL,
            version INTEGER NOT NULL,
            bundle TEXT NOT NULL,
            created TEXT NOT NULL
        )""",
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            flow TEXT NOT NULL,
            version INTEGER NOT NULL,
            digest TEXT NOT NULL REFERENCES definitions(digest),
            status TEXT NOT NULL,
            inputs TEXT NOT NULL,
            outputs TEXT,
            error TEXT,
            error_step TEXT,
            thread_id TEXT,
            parent TEXT,
            owner_pid INTEGER,
            owner_host TEXT,
            owner_start TEXT,
            created TEXT NOT NULL,
            started TEXT,
            finished TEXT,
            duration REAL NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX runs_flow ON runs (flow, id)",
        "CREATE INDEX runs_status ON runs (status, id)",
        """CREATE TABLE events (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            step TEXT,
            time TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
    ]),
    (2, [
        # approval gates a run stopped at, and the decision taken on each (engine/state/gates.py)
        """CREATE TABLE gates (
            run_id TEXT NOT NULL,
            interrupt_id TEXT NOT NULL,
            gate TEXT NOT NULL,
            step TEXT NOT NULL,
            status TEXT NOT NULL,
            request TEXT NOT NULL,
            created TEXT NOT NULL,
            timeout_at TEXT,
            decided TEXT,
            actor TEXT,
            decision TEXT,
            PRIMARY KEY (run_id, interrupt_id)
        ) WITHOUT ROWID""",
        "CREATE INDEX gates_waiting ON gates (status, timeout_at)",
        # conversation threads: runs that share one LangGraph thread (engine/state/threads.py)
        """CREATE TABLE threads (
            id TEXT PRIMARY KEY,
            flow TEXT NOT NULL,
            title TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            turns INTEGER NOT NULL DEFAULT 0,
            last_run TEXT
        )""",
        "CREATE INDEX runs_thread ON runs (thread_id, id)",
    ]),
    (3, [
        # a thread's name (engine/runtime/naming.py) and the checkpoint of its last finished turn,
        # which the next turn starts from (engine/runtime/turns.py)
        "ALTER TABLE threads ADD COLUMN name TEXT",
        "ALTER TABLE threads ADD COLUMN checkpoint TEXT",
        "UPDATE threads SET checkpoint = '*'",  # threads from before: their turns go on from the latest checkpoint
        # the conversation of each thread, for people and UIs (engine/state/messages.py)
        """CREATE TABLE messages (
            thread_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            run_id TEXT NOT NULL,
            created TEXT NOT NULL,
            PRIMARY KEY (thread_id, idx)
        ) WITHOUT ROWID""",
        "CREATE UNIQUE INDEX messages_run ON messages (run_id, role)",
    ]),
    (4, [
        # the server's schedules (engine/serve/schedules.py), as a migration so that servers sharing
        # a Postgres database never race to create it (a SQLite file may have it already)
        """CREATE TABLE IF NOT EXISTS serve_schedules (
            flow TEXT PRIMARY KEY,
            schedule TEXT NOT NULL,
            first_seen TEXT NOT NULL,
            last_fire TEXT,
            last_run TEXT
        )""",
    ]),
    (5, [
        # leases of server replicas on the runs they execute (engine/state/liveness.py): the
        # replica's id and when its lease runs out unless its heartbeat pushes it ahead
        "ALTER TABLE runs ADD COLUMN owner_replica TEXT",
        "ALTER TABLE runs ADD COLUMN lease_until REAL",
        "CREATE INDEX runs_replica ON runs (owner_replica, status)",
    ]),
    (6, [
        # a thread's metadata, as LangGraph Server API clients give it (engine/serve/langgraph_api/): a JSON object
        "ALTER TABLE threads ADD COLUMN metadata TEXT",
    ]),
    (7, [
        # the durability mode a run was started in (docs/runtime.md, "Durability"); NULL for runs from
        # before, which were all sync
        "ALTER TABLE runs ADD COLUMN durability TEXT",
    ]),
    (8, [
        # `runs` lists newest first by start time (NEWEST_FIRST): without this, every listing sorts
        # the whole table; and `gc` finds finished runs by when they finished (engine/state/retention.py)
        "CREATE INDEX runs_newest ON runs ((COALESCE(started, created)), id)",
        "CREATE INDEX runs_finished ON runs (status, finished)",
        # chores of the server done once a day across replicas (the daily gc: engine/serve/chores.py)
        """CREATE TABLE serve_chores (
            name TEXT PRIMARY KEY,
            last_done TEXT NOT NULL
        )""",
    ]),
    (9, [
        # a server records a run it accepts as `queued` before answering (any replica may start it,
        # docs/postgres.md "The queue"): what it was asked for travels with it, so that whichever
        # server starts it runs it the same way: the yard folder it writes to, and whether it keeps
        # its event trace (1, or 0 for `trace: false`, which only durability none allows; NULL for
        # runs from before, which all kept it). Its durability mode is in `durability` (migration 7)
        "ALTER TABLE runs ADD COLUMN output_dir TEXT",
        "ALTER TABLE runs ADD COLUMN trace INTEGER",
    ]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def migrate(conn: sqlite3.Connection, now: str) -> None:
    """Bring our tables to SCHEMA_VERSION; safe when several processes open the file at once."""
    conn.execute("CREATE TABLE IF NOT EXISTS blockyard_migrations (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)")
    if _applied(conn) >= SCHEMA_VERSION:
        _check_not_newer(conn)
        return
    conn.execute("BEGIN IMMEDIATE")  # re-read under the write lock: another process may have migrated
    try:
        current = _applied(conn)
        for version, statements in MIGRATIONS:
            if version <= current:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO blockyard_migrations (version, applied) VALUES (?, ?)", (version, now))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    _check_not_newer(conn)


def _applied(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT MAX(version) FROM blockyard_migrations").fetchone()
    return int(row[0] or 0)


def _check_not_newer(conn: sqlite3.Connection) -> None:
    check_version(_applied(conn))


def check_version(found: int) -> None:
    """A database migrated by a newer blockyard is refused: its tables may mean something else."""
    if found > SCHEMA_VERSION:
        raise StateError(f"the state database has schema version {found}, newer than this blockyard "
                         f"understands ({SCHEMA_VERSION}); upgrade blockyard")


@dataclass(frozen=True)
class RunRecord:
    """One row of `runs`."""

    id: str
    flow: str
    version: int
    digest: str
    status: RunStatus
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None = None
    error: str | None = None
    error_step: str | None = None
    thread_id: str | None = None
    parent: str | None = None
    owner_pid: int | None = None
    owner_host: str | None = None
    owner_start: str | None = None
    created: str = ""
    started: str | None = None
    finished: str | None = None
    duration: float = 0.0
    owner_replica: str | None = None
    lease_until: float | None = None
    durability: str | None = None  # sync | async | exit | none; None: a run from before the modes (sync)
    output_dir: str | None = None  # a queued run's output folder (a started run's is in its run_started event)
    trace: bool = True  # whether it records its event trace (False: durability none with `trace: false`)

    @property
    def mode(self) -> str:
        """The run's durability mode (docs/runtime.md, "Durability")."""
        return self.durability or "sync"

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _RUN_COLUMNS}


_RUN_COLUMNS = tuple(RunRecord.__dataclass_fields__)
_SELECT_RUN = f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs"
# By start time, not by id: generated ids sort by time, but `--run-id` can be any text. Equal
# times (same millisecond) fall back to the id, so the order is always the same.
NEWEST_FIRST = "COALESCE(started, created) DESC, id DESC"
OLDEST_FIRST = "COALESCE(started, created), id"


def _record(row: Sequence[Any]) -> RunRecord:
    values = dict(zip(_RUN_COLUMNS, row, strict=True))
    values["inputs"] = json.loads(values["inputs"])
    values["outputs"] = json.loads(values["outputs"]) if values["outputs"] is not None else None
    values["duration"] = float(values["duration"] or 0.0)
    values["status"] = RunStatus(values["status"])
    values["trace"] = values["trace"] is None or bool(values["trace"])
    return RunRecord(**values)


# json.dumps with options builds a new encoder per call: a third of the cost of a trace row
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def dumps(value: Any) -> str:
    """JSON for the tables: compact, UTF-8, and never failing on an odd value."""
    return _ENCODER.encode(value)


# ---- writes (committed by the writer) ---------------------------------------------------------

def save_definition(digest: str, flow: str, version: int, bundle_json: str, now: str) -> Write:
    return Write("INSERT OR IGNORE INTO definitions (digest, flow, version, bundle, created) VALUES (?, ?, ?, ?, ?)",
                 (digest, flow, version, bundle_json, now))


def insert_run(run: RunRecord) -> Write:
    values = run.as_dict()
    values["inputs"] = dumps(run.inputs)
    values["outputs"] = dumps(run.outputs) if run.outputs is not None else None
    values["trace"] = int(run.trace)  # an INTEGER column (Postgres takes no bool for it)
    marks = ", ".join("?" for _ in _RUN_COLUMNS)
    return Write(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES ({marks})",
                 tuple(values[name] for name in _RUN_COLUMNS))


def end_run(run_id: str, status: RunStatus, *, outputs: dict[str, Any] | None, error: str | None,
            error_step: str | None, finished: str | None, elapsed: float) -> Write:
    """Record how an execution of the run ended; `elapsed` adds to the run's total duration."""
    return Write("UPDATE runs SET status = ?, outputs = ?, error = ?, error_step = ?, finished = ?, "
                 "duration = duration + ? WHERE id = ?",
                 (status, dumps(outputs) if outputs is not None else None, error, error_step, finished,
                  elapsed, run_id))


def insert_events(events: Iterable[Event]) -> Write:
    rows = [(e.run_id, e.seq, e.type, e.step, e.time, dumps(e.data)) for e in events]
    return Write("INSERT OR REPLACE INTO events (run_id, seq, type, step, time, data) VALUES (?, ?, ?, ?, ?, ?)",
                 rows, many=True)


def claim(run_id: str, expected: RunRecord, pid: int, host: str, start: str | None,
          replica: str | None = None, lease_until: float | None = None) -> Any:
    """A writer call that makes this process the run's owner, only if nobody changed it meanwhile.

    Returns True when the claim won: two `resume`s of one run (or two replicas taking over a run
    whose lease ran out) cannot both continue it.
    """

    def apply(conn: Connection) -> bool:
        cursor = conn.execute(
            "UPDATE runs SET status = 'running', owner_pid = ?, owner_host = ?, owner_start = ?, "
            "owner_replica = ?, lease_until = ?, error = NULL, error_step = NULL, finished = NULL "
            "WHERE id = ? AND status = ? AND owner_pid IS ? AND owner_host IS ? AND owner_start IS ? "
            "AND owner_replica IS ?",
            (pid, host, start, replica, lease_until, run_id, expected.status, expected.owner_pid,
             expected.owner_host, expected.owner_start, expected.owner_replica))
        return bool(cursor.rowcount == 1)

    return apply


def heartbeat(replica: str, lease_until: float) -> Write:
    """A replica's heartbeat: its lease on every run it executes or holds queued now lasts until `lease_until`."""
    return Write("UPDATE runs SET lease_until = ? WHERE owner_replica = ? AND status IN ('running', 'queued')",
                 (lease_until, replica))


class Admission(StrEnum):
    """What became of a try to start a queued run (`start_queued`)."""

    STARTED = "started"  # it is running now, owned by the caller
    FULL = "full"  # the global limit is reached: try again when a slot frees
    GONE = "gone"  # no longer queued under the caller (another server took it over, or it was started)


def start_queued(run_id: str, owner: Owner, *, limit: int | None) -> Call:
    """A writer call that starts queued run `run_id` for `owner`, which holds it queued — only
    while fewer than `limit` runs are running across every server on the database (the global
    limit, `server.max_concurrent_runs_global`; `running_count` says which count).

    Count and claim are one transaction, and the transactions of every server that count take
    turns: on Postgres under a transaction-level advisory lock, on SQLite by the write lock every
    transaction of the writer takes (BEGIN IMMEDIATE). So two servers never both take the last slot."""

    def apply(conn: Connection) -> Admission:
        if limit is not None:
            lock_admissions(conn)
            if running_count(conn, time.time(), other_than=run_id) >= limit:
                return Admission.FULL
        cursor = conn.execute(  # its start time read now, after the run whose slot it takes ended
            "UPDATE runs SET status = 'running', owner_pid = ?, owner_host = ?, owner_start = ?, lease_until = ?, "
            "started = ? WHERE id = ? AND status = 'queued' AND owner_replica IS ? AND owner_pid = ?",
            (owner.pid, owner.host, owner.start, owner.lease_until, now_iso(), run_id, owner.replica, owner.pid))
        return Admission.STARTED if cursor.rowcount == 1 else Admission.GONE

    return apply


def running_count(conn: Connection, now: float, other_than: str = "") -> int:
    """Runs running across every server: those of replicas while their lease lasts (a dead
    replica's stop counting once it runs out), those of processes that hold no lease (`blockyard
    run`, a server that is no replica) while their row says so."""
    return int(conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'running' AND id <> ? "
                            "AND (lease_until IS NULL OR lease_until >= ?)", (other_than, now)).fetchone()[0])


def lock_admissions(conn: Connection) -> None:
    """Make this transaction the only one counting running runs until it ends (see `start_queued`):
    Postgres's transaction-level advisory lock; SQLite's writer holds the file's write lock already."""
    if not isinstance(conn, sqlite3.Connection):
        conn.execute(Native("SELECT pg_advisory_xact_lock(%s)"), (ADMISSION_LOCK,))


def adopt_queued(expected: RunRecord, owner: Owner) -> Call:
    """A writer call that makes `owner` the holder of a queued run whose server died, only if nobody
    adopted or started it meanwhile (of several replicas trying at once, one wins); True if it won."""

    def apply(conn: Connection) -> bool:
        cursor = conn.execute(
            "UPDATE runs SET owner_pid = ?, owner_host = ?, owner_start = ?, owner_replica = ?, lease_until = ? "
            "WHERE id = ? AND status = 'queued' AND owner_pid IS ? AND owner_host IS ? AND owner_start IS ? "
            "AND owner_replica IS ?",
            (owner.pid, owner.host, owner.start, owner.replica, owner.lease_until, expected.id, expected.owner_pid,
             expected.owner_host, expected.owner_start, expected.owner_replica))
        return bool(cursor.rowcount == 1)

    return apply


def release_queued(run_ids: Sequence[str]) -> Write:
    """A server that stops lets go of the runs it held queued: owned by nobody, they are started by
    another server (or this one's next start), or by `blockyard resume`."""
    return Write("UPDATE runs SET owner_pid = NULL, owner_host = NULL, owner_start = NULL, owner_replica = NULL, "
                 "lease_until = NULL WHERE id = ? AND status = 'queued'", [(run_id,) for run_id in run_ids], many=True)


def fence(run_id: str, replica: str, lease_until: float) -> Write:
    """The guard of every write of an execution on a replica (engine/state/fencing.py): it changes
    the run's row (pushing its lease ahead) only while this replica still owns the running run,
    and the writer fails the statements it travels with when it changed none."""
    return Write("UPDATE runs SET lease_until = ? WHERE id = ? AND owner_replica = ? AND status = 'running'",
                 (lease_until, run_id, replica), mergeable=True, guard=True)


# ---- reads ----------------------------------------------------------------------------------

def get_run(conn: Connection, run_id: str) -> RunRecord | None:
    row = conn.execute(f"{_SELECT_RUN} WHERE id = ?", (run_id,)).fetchone()
    return _record(row) if row is not None else None


def list_runs(conn: Connection, *, flow: str | None = None, statuses: Sequence[str] | None = None,
              limit: int | None = 50, thread: str | None = None) -> list[RunRecord]:
    """Runs, newest first (by start time); with `thread`, the turns of that conversation thread."""
    where: list[str] = []
    params: list[Any] = []
    if thread is not None:
        where.append("thread_id = ?")
        params.append(thread)
    if flow is not None:
        where.append("flow = ?")
        params.append(flow)
    if statuses:
        where.append(f"status IN ({', '.join('?' for _ in statuses)})")
        params.extend(statuses)
    sql = _SELECT_RUN + (f" WHERE {' AND '.join(where)}" if where else "") + f" ORDER BY {NEWEST_FIRST}"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_record(row) for row in conn.execute(sql, params)]


def run_ids(conn: Connection) -> list[str]:
    return [row[0] for row in conn.execute(f"SELECT id FROM runs ORDER BY {NEWEST_FIRST} LIMIT 1000")]


def load_events(conn: Connection, run_id: str, after: int = 0) -> list[Event]:
    rows = conn.execute("SELECT run_id, seq, type, step, time, data FROM events WHERE run_id = ? AND seq > ? "
                        "ORDER BY seq", (run_id, after))
    return [Event(type_, rid, seq, step, time, json.loads(data)) for rid, seq, type_, step, time, data in rows]


def waiting_gates(conn: Connection, run_id: str) -> list[Event]:
    """The approval_required events of the run's latest execution (what it waits for now)."""
    rows = conn.execute(
        "SELECT run_id, seq, type, step, time, data FROM events WHERE run_id = ? AND type = 'approval_required' "
        "AND seq > (SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ? AND type = 'run_started') ORDER BY seq",
        (run_id, run_id))
    return [Event(type_, rid, seq, step, time, json.loads(data)) for rid, seq, type_, step, time, data in rows]


def last_seq(conn: Connection, run_id: str) -> int:
    row = conn.execute("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,)).fetchone()
    return int(row[0] or 0)


def leased_runs(conn: Connection, other_than: str) -> list[RunRecord]:
    """Runs executing or queued under another server's lease, oldest first (whether it still lives:
    `effective_status`); queued ones of servers that were no replica too (they are held by their pid)."""
    return [_record(row) for row in conn.execute(
        f"{_SELECT_RUN} WHERE (status = 'running' AND owner_replica IS NOT NULL AND owner_replica <> ?) "
        f"OR (status = 'queued' AND (owner_replica IS NULL OR owner_replica <> ?)) ORDER BY {OLDEST_FIRST}",
        (other_than, other_than))]


def load_definition(conn: Connection, digest: str) -> str | None:
    row = conn.execute("SELECT bundle FROM definitions WHERE digest = ?", (digest,)).fetchone()
    return row[0] if row is not None else None


def effective_status(record: RunRecord) -> RunStatus:
    """`running` (or `queued`) only while its owner lives; a run whose process died shows as
    `interrupted` (a replica takes it over, or `blockyard resume` goes on with it)."""
    if record.status in (RunStatus.RUNNING, RunStatus.QUEUED) and not liveness.is_alive(
            record.owner_pid, record.owner_host, record.owner_start, record.owner_replica, record.lease_until):
        return RunStatus.INTERRUPTED
    return record.status


def open_existing(path: Path) -> sqlite3.Connection | None:
    """A connection for commands that only look (`runs`, `runs show`); None when there is no database.

    Reads through it can still meet a damaged page: commands use `reading`, which says so clearly."""
    if not database.exists(path):
        return None
    conn = database.open_database(path)
    try:
        with database.guard(path):
            migrate(conn, now_iso())
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """`open_existing` for the length of a block, whose reads meet a damaged file as a `StateError`."""
    conn = open_existing(path)
    try:
        with database.guard(path):
            yield conn
    finally:
        if conn is not None:
            conn.close()
