"""Our own tables in the state database: runs, their event trace, and the definitions they ran.

The checkpointer's tables are for the engine; these are for people (`blockyard runs`, the
server's pages). Plain sqlite3, schema versioned by `blockyard_migrations`. Writes are built here
as `Write` statements and committed by the group-commit writer; reads take a connection.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from engine.core.events import STORED_STATUSES, Event, RunStatus, now_iso
from engine.core.usage import SPEND_KEYS, Spend
from engine.core.values import JsonDict
from engine.state import database, liveness
from engine.state.database import Connection, Native
from engine.state.liveness import Owner
from engine.state.migrations import migrate
from engine.state.writer import Call, Write

STATUSES = STORED_STATUSES
# the key of the advisory lock under which servers count running runs (`start_queued`): arbitrary, fixed
ADMISSION_LOCK = 0x626C6F636B79 + 2


@dataclass(frozen=True)
class RunRecord:
    """One row of `runs`."""

    id: str
    flow: str
    version: int
    digest: str
    status: RunStatus
    inputs: JsonDict
    outputs: JsonDict | None = None
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
    durability: str | None = (
        None  # sync | async | exit | none; None: a run from before the modes (sync)
    )
    output_dir: str | None = (
        None  # a queued run's output folder (a started run's is in its run_started event)
    )
    trace: bool = (
        True  # whether it records its event trace (False: durability none with `trace: false`)
    )
    # what its model calls spent, over all its executions (engine/core/usage.py, `Spend`; migration 11)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    # the budget its runs are held to (engine/spec/budget.py, as JSON data): the flow's and the yard's when it
    # was created, raised by `resume --budget`; None: no limits
    budget: JsonDict | None = None
    # the W3C traceparent of the HTTP caller that queued it (migration 13): its first execution continues the
    # caller's trace, on whichever server starts it; None: no caller's trace
    traceparent: str | None = None
    # a turn of a thread: the finished turn it goes on from (migration 15, engine/state/branches.py); None: the
    # first turn of its branch, or not a turn
    after_turn: str | None = None
    # a turn that says an earlier turn's message again (a regenerated answer): that turn (migration 15)
    regenerates: str | None = None

    @property
    def mode(self) -> str:
        """The run's durability mode (docs/runtime.md, "Durability")."""
        return self.durability or "sync"

    def as_dict(self) -> JsonDict:
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
    values["cost_usd"] = float(values["cost_usd"] or 0.0)
    values["budget"] = json.loads(values["budget"]) if values["budget"] else None
    return RunRecord(**values)


# json.dumps with options builds a new encoder per call: a third of the cost of a trace row
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def dumps(value: Any) -> str:
    """JSON for the tables: compact, UTF-8, and never failing on an odd value."""
    return _ENCODER.encode(value)


# ---- writes (committed by the writer) ---------------------------------------------------------


def save_definition(digest: str, flow: str, version: int, bundle_json: str, now: str) -> Write:
    return Write(
        "INSERT OR IGNORE INTO definitions (digest, flow, version, bundle, created) VALUES (?, ?, ?, ?, ?)",
        (digest, flow, version, bundle_json, now),
    )


def insert_run(run: RunRecord) -> Write:
    values = run.as_dict()
    values["inputs"] = dumps(run.inputs)
    values["outputs"] = dumps(run.outputs) if run.outputs is not None else None
    values["trace"] = int(run.trace)  # an INTEGER column (Postgres takes no bool for it)
    values["budget"] = dumps(run.budget) if run.budget is not None else None
    marks = ", ".join("?" for _ in _RUN_COLUMNS)
    return Write(
        f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES ({marks})",
        tuple(values[name] for name in _RUN_COLUMNS),
    )


def end_run(
    run_id: str,
    status: RunStatus,
    *,
    outputs: JsonDict | None,
    error: str | None,
    error_step: str | None,
    finished: str | None,
    elapsed: float,
    spend: Spend | None = None,
) -> Write:
    """Record how an execution of the run ended; `elapsed` adds to the run's total duration, `spend`
    (the run's model calls over all its executions, engine/core/usage.py) replaces its totals."""
    if spend is None:
        return Write(
            "UPDATE runs SET status = ?, outputs = ?, error = ?, error_step = ?, finished = ?, "
            "duration = duration + ? WHERE id = ?",
            (
                status,
                dumps(outputs) if outputs is not None else None,
                error,
                error_step,
                finished,
                elapsed,
                run_id,
            ),
        )
    return Write(
        "UPDATE runs SET status = ?, outputs = ?, error = ?, error_step = ?, finished = ?, "
        f"duration = duration + ?, {_SPEND_SET} WHERE id = ?",
        (
            status,
            dumps(outputs) if outputs is not None else None,
            error,
            error_step,
            finished,
            elapsed,
            *(getattr(spend, key) for key in SPEND_KEYS),
            run_id,
        ),
    )


_SPEND_SET = ", ".join(f"{key} = ?" for key in SPEND_KEYS)


def set_budget(run_id: str, budget: JsonDict | None) -> Write:
    """A stopped run's budget, raised to go on (`blockyard resume --budget`)."""
    return Write(
        "UPDATE runs SET budget = ? WHERE id = ?",
        (dumps(budget) if budget is not None else None, run_id),
    )


def traced_spend(conn: Connection, run_id: str) -> Spend:
    """What the run's model calls spent by its trace (its model_call events), over every execution —
    a crashed one's calls too, which its row's totals missed."""
    spend = Spend()
    for (data,) in conn.execute(
        "SELECT data FROM events WHERE run_id = ? AND type = 'model_call'", (run_id,)
    ):
        spend.add(json.loads(data))
    return spend


def thread_spend(conn: Connection, thread_id: str, run_id: str) -> tuple[Spend, float]:
    """What the thread's other turns (runs) spent, and the seconds they took."""
    columns = ", ".join(f"SUM({key})" for key in SPEND_KEYS)
    row = conn.execute(
        f"SELECT {columns}, SUM(duration) FROM runs WHERE thread_id = ? AND id != ?",
        (thread_id, run_id),
    ).fetchone()
    if row is None:
        return Spend(), 0.0
    return Spend.of(dict(zip(SPEND_KEYS, row[:-1], strict=True))), float(row[-1] or 0.0)


def insert_events(events: Iterable[Event]) -> Write:
    # mergeable: trace rows are keyed by their run and seq, which no other statement of a batch
    # touches, so a batch's checkpoints with the trace rows they carry (engine/state/durable.py)
    # run as a few statements for all runs instead of several per checkpoint (engine/state/writer.py)
    rows = [(e.run_id, e.seq, e.type, e.step, e.time, dumps(e.data)) for e in events]
    return Write(
        "INSERT OR REPLACE INTO events (run_id, seq, type, step, time, data) VALUES (?, ?, ?, ?, ?, ?)",
        rows,
        many=True,
        mergeable=True,
    )


def claim(
    run_id: str,
    expected: RunRecord,
    pid: int,
    host: str,
    start: str | None,
    replica: str | None = None,
    lease_until: float | None = None,
) -> Any:
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
            (
                pid,
                host,
                start,
                replica,
                lease_until,
                run_id,
                expected.status,
                expected.owner_pid,
                expected.owner_host,
                expected.owner_start,
                expected.owner_replica,
            ),
        )
        return bool(cursor.rowcount == 1)

    return apply


def heartbeat(replica: str, lease_until: float, run_ids: Sequence[str]) -> Write:
    """A replica's heartbeat: its lease on the runs it executes or holds queued now (`run_ids`, its
    jobs) lasts until `lease_until`. Only those: a row left `running` under the replica by an
    execution that ended without recording its end (the database failed then) must not be kept
    alive by the heartbeat, or no other replica would ever take it over."""
    return Write(
        "UPDATE runs SET lease_until = ? WHERE id = ? AND owner_replica = ? "
        "AND status IN ('running', 'queued')",
        [(lease_until, run_id, replica) for run_id in run_ids],
        many=True,
    )


class Admission(StrEnum):
    """What became of a try to start a queued run (`start_queued`)."""

    STARTED = "started"  # it is running now, owned by the caller
    FULL = "full"  # the global limit is reached: try again when a slot frees
    GONE = (
        "gone"  # no longer queued under the caller (another server took it over, or it was started)
    )


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
            (
                owner.pid,
                owner.host,
                owner.start,
                owner.lease_until,
                now_iso(),
                run_id,
                owner.replica,
                owner.pid,
            ),
        )
        return Admission.STARTED if cursor.rowcount == 1 else Admission.GONE

    return apply


def running_count(conn: Connection, now: float, other_than: str = "") -> int:
    """Runs running across every server: those of replicas while their lease lasts (a dead
    replica's stop counting once it runs out), those of processes that hold no lease (`blockyard
    run`, a server that is no replica) while their row says so."""
    return int(
        conn.execute(
            "SELECT COUNT(*) FROM runs WHERE status = 'running' AND id <> ? "
            "AND (lease_until IS NULL OR lease_until >= ?)",
            (other_than, now),
        ).fetchone()[0]
    )


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
            (
                owner.pid,
                owner.host,
                owner.start,
                owner.replica,
                owner.lease_until,
                expected.id,
                expected.owner_pid,
                expected.owner_host,
                expected.owner_start,
                expected.owner_replica,
            ),
        )
        return bool(cursor.rowcount == 1)

    return apply


def release_queued(run_ids: Sequence[str]) -> Write:
    """A server that stops lets go of the runs it held queued: owned by nobody, they are started by
    another server (or this one's next start), or by `blockyard resume`."""
    return Write(
        "UPDATE runs SET owner_pid = NULL, owner_host = NULL, owner_start = NULL, owner_replica = NULL, "
        "lease_until = NULL WHERE id = ? AND status = 'queued'",
        [(run_id,) for run_id in run_ids],
        many=True,
    )


def release_unstarted(run_id: str, owner: Owner) -> Write:
    """A run recorded started (`Engine.enqueue(start=True)`) that its server did not execute after
    all — it began to stop before the run was handed to it: queued again and held by nobody, as
    `release_queued` leaves a queued run, so another server (or `blockyard resume`) starts it."""
    return Write(
        "UPDATE runs SET status = 'queued', started = NULL, owner_pid = NULL, owner_host = NULL, "
        "owner_start = NULL, owner_replica = NULL, lease_until = NULL "
        "WHERE id = ? AND status = 'running' AND owner_pid = ? AND owner_replica IS ?",
        (run_id, owner.pid, owner.replica),
    )


def cancel_unstarted(run_id: str, owner: Owner, error: str, finished: str) -> Write:
    """A run `owner` held that a client cancelled before its execution began (queued, or recorded
    started by `Engine.enqueue(start=True)` and not yet executing): `interrupted`, held by nobody, so
    that no server adopts and runs it after all; `blockyard resume` starts it from its inputs. A run
    whose execution began records its own end, which this leaves alone (it is no longer queued or
    running by then)."""
    return _end_held(run_id, owner, RunStatus.INTERRUPTED, error, finished)


def fail_unended(run_id: str, owner: Owner, error: str, finished: str) -> Write:
    """A run `owner` held (queued, or running) whose execution ended without recording its end: an
    error escaped before the runtime began it (its definition could not be read back, its context
    not built) or while it recorded its end. `failed`, with `error`, held by nobody — else the row
    would stay `running` under a live server for good, and nobody could resume it. An execution that
    recorded its end left the run neither queued nor running: this changes nothing then."""
    return _end_held(run_id, owner, RunStatus.FAILED, error, finished)


def _end_held(run_id: str, owner: Owner, status: RunStatus, error: str, finished: str) -> Write:
    """Run `run_id` ends as `status` with `error`, held by nobody — only while `owner` holds it queued or running."""
    return Write(
        "UPDATE runs SET status = ?, error = ?, finished = ?, owner_pid = NULL, owner_host = NULL, "
        "owner_start = NULL, owner_replica = NULL, lease_until = NULL "
        "WHERE id = ? AND status IN ('queued', 'running') AND owner_pid = ? AND owner_host = ? "
        "AND owner_replica IS ?",
        (str(status), error, finished, run_id, owner.pid, owner.host, owner.replica),
    )


def fence(run_id: str, replica: str, lease_until: float) -> Write:
    """The guard of every write of an execution on a replica (engine/state/fencing.py): it changes
    the run's row (pushing its lease ahead) only while this replica still owns the running run,
    and the writer fails the statements it travels with when it changed none."""
    return Write(
        "UPDATE runs SET lease_until = ? WHERE id = ? AND owner_replica = ? AND status = 'running'",
        (lease_until, run_id, replica),
        mergeable=True,
        guard=True,
    )


# ---- reads ----------------------------------------------------------------------------------


def get_run(conn: Connection, run_id: str) -> RunRecord | None:
    row = conn.execute(f"{_SELECT_RUN} WHERE id = ?", (run_id,)).fetchone()
    return _record(row) if row is not None else None


def list_runs(
    conn: Connection,
    *,
    flow: str | None = None,
    statuses: Sequence[str] | None = None,
    limit: int | None = 50,
    thread: str | None = None,
) -> list[RunRecord]:
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
    sql = (
        _SELECT_RUN
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + f" ORDER BY {NEWEST_FIRST}"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_record(row) for row in conn.execute(sql, params)]


def run_ids(conn: Connection) -> list[str]:
    return [
        row[0] for row in conn.execute(f"SELECT id FROM runs ORDER BY {NEWEST_FIRST} LIMIT 1000")
    ]


def load_events(conn: Connection, run_id: str, after: int = 0) -> list[Event]:
    rows = conn.execute(
        "SELECT run_id, seq, type, step, time, data FROM events WHERE run_id = ? AND seq > ? "
        "ORDER BY seq",
        (run_id, after),
    )
    return [
        Event(type_, rid, seq, step, time, json.loads(data))
        for rid, seq, type_, step, time, data in rows
    ]


def waiting_gates(conn: Connection, run_id: str) -> list[Event]:
    """The approval_required events of the run's latest execution (what it waits for now)."""
    rows = conn.execute(
        "SELECT run_id, seq, type, step, time, data FROM events WHERE run_id = ? AND type = 'approval_required' "
        "AND seq > (SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ? AND type = 'run_started') ORDER BY seq",
        (run_id, run_id),
    )
    return [
        Event(type_, rid, seq, step, time, json.loads(data))
        for rid, seq, type_, step, time, data in rows
    ]


def last_seq(conn: Connection, run_id: str) -> int:
    row = conn.execute("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,)).fetchone()
    return int(row[0] or 0)


def leased_runs(conn: Connection, other_than: str) -> list[RunRecord]:
    """Runs executing or queued under another server's lease, oldest first (whether it still lives:
    `effective_status`); queued ones of servers that were no replica too (they are held by their pid)."""
    return [
        _record(row)
        for row in conn.execute(
            f"{_SELECT_RUN} WHERE (status = 'running' AND owner_replica IS NOT NULL AND owner_replica <> ?) "
            f"OR (status = 'queued' AND (owner_replica IS NULL OR owner_replica <> ?)) ORDER BY {OLDEST_FIRST}",
            (other_than, other_than),
        )
    ]


def load_definition(conn: Connection, digest: str) -> str | None:
    row = conn.execute("SELECT bundle FROM definitions WHERE digest = ?", (digest,)).fetchone()
    return row[0] if row is not None else None


def effective_status(record: RunRecord) -> RunStatus:
    """`running` (or `queued`) only while its owner lives; a run whose process died shows as
    `interrupted` (a replica takes it over, or `blockyard resume` goes on with it)."""
    if record.status in (RunStatus.RUNNING, RunStatus.QUEUED) and not liveness.is_alive(
        record.owner_pid,
        record.owner_host,
        record.owner_start,
        record.owner_replica,
        record.lease_until,
    ):
        return RunStatus.INTERRUPTED
    return record.status


def open_existing(path: Path) -> sqlite3.Connection | None:
    """A connection for commands that only look (`runs`, `runs show`); None when there is no database.

    Reads through it can still meet a damaged page: commands use `backends.reading`, which says so clearly."""
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
