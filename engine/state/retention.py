"""Retention: which ended runs the state database no longer keeps, and deleting them (`blockyard gc`,
and `blockyard serve` once a day; the policy is `retention:` of blockyard.yaml, docs/runtime.md).

Two tiers for finished runs: past `traces` a run loses its event trace and checkpoint (its row stays
listed), past `runs` (or beyond `max_runs`) it goes entirely. Failed and interrupted runs go past
`failed`. Never touched: runs still running, runs waiting for an approval, and the turns of
conversation threads (a thread's checkpoint is what its next turn starts from; its turns are its
history). Definitions stay: they are small, shared by runs, and a process may still run them.

Deleting goes in batches, each its own transaction, so that a big collection never holds the
write lock for long; a crash between batches leaves whole runs, never half of one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from engine.core.events import RunStatus
from engine.spec.common import parse_duration
from engine.spec.config import RetentionSpec
from engine.state import backends, database
from engine.state.database import Connection
from engine.state.location import Location

BATCH = 500  # runs per transaction
# LangGraph's checkpoint tables on each backend, and the steps finished inside a node of a durable run
# (engine/state/inline_steps.py): keyed by a run's thread id (its run id)
CHECKPOINT_TABLES = {
    "sqlite": ("checkpoints", "writes", "inline_steps"),
    "postgres": ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "inline_steps"),
}
ENDED_BADLY = (RunStatus.FAILED, RunStatus.INTERRUPTED)


@dataclass(frozen=True)
class Policy:
    """Ages in seconds (None: kept forever) and the most finished runs kept."""

    traces: float | None = None
    runs: float | None = None
    failed: float | None = None
    max_runs: int | None = None

    @classmethod
    def of(cls, spec: RetentionSpec, older_than: str | None = None) -> Policy:
        """The policy of blockyard.yaml; `older_than` (`gc --older-than`) replaces the age of
        finished runs for one collection."""
        age = parse_duration(older_than) if older_than is not None else None
        return cls(
            traces=_seconds(spec.traces),
            runs=age if age is not None else _seconds(spec.runs),
            failed=_seconds(spec.failed),
            max_runs=spec.max_runs,
        )

    @property
    def empty(self) -> bool:
        return (
            self.traces is None
            and self.runs is None
            and self.failed is None
            and self.max_runs is None
        )


def _seconds(text: str | None) -> float | None:
    return parse_duration(text) if text is not None else None


@dataclass
class Plan:
    """What one collection deletes: whole runs, and the traces (and checkpoints) of others."""

    runs: list[str] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.runs and not self.traces


def cutoff(now: datetime, seconds: float) -> str:
    """The time `seconds` before `now`, in the format of the runs table's times (now_iso)."""
    moment = now.astimezone(UTC) - timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def plan(conn: Connection, policy: Policy, now: datetime) -> Plan:
    """The runs `policy` deletes at `now`."""
    gone: dict[str, None] = {}  # ordered, without duplicates
    if policy.runs is not None:
        for (run_id,) in conn.execute(
            "SELECT id FROM runs WHERE status = ? AND thread_id IS NULL AND finished < ? "
            "ORDER BY finished",
            (RunStatus.FINISHED, cutoff(now, policy.runs)),
        ):
            gone[run_id] = None
    if policy.max_runs is not None:
        for (run_id,) in conn.execute(
            "SELECT id FROM runs WHERE status = ? AND thread_id IS NULL "
            "ORDER BY finished DESC, id DESC LIMIT -1 OFFSET ?"
            if _sqlite(conn)
            else "SELECT id FROM runs WHERE status = ? AND thread_id IS NULL "
            "ORDER BY finished DESC, id DESC OFFSET ?",
            (RunStatus.FINISHED, policy.max_runs),
        ):
            gone[run_id] = None
    if policy.failed is not None:
        for (run_id,) in conn.execute(
            f"SELECT id FROM runs WHERE status IN ({', '.join('?' for _ in ENDED_BADLY)}) AND thread_id IS NULL "
            "AND COALESCE(finished, started, created) < ? ORDER BY created",
            (*ENDED_BADLY, cutoff(now, policy.failed)),
        ):
            gone[run_id] = None
    traces: list[str] = []
    if policy.traces is not None:
        traces = [
            run_id
            for (run_id,) in conn.execute(
                "SELECT id FROM runs WHERE status = ? AND thread_id IS NULL AND finished < ? "
                "AND EXISTS (SELECT 1 FROM events WHERE run_id = runs.id) ORDER BY finished",
                (RunStatus.FINISHED, cutoff(now, policy.traces)),
            )
            if run_id not in gone
        ]
    return Plan(list(gone), traces)


def _sqlite(conn: Connection) -> bool:
    return isinstance(conn, sqlite3.Connection)


def backend_of(conn: Connection) -> str:
    return "sqlite" if _sqlite(conn) else "postgres"


def _marks(ids: Sequence[str]) -> str:
    return ", ".join("?" for _ in ids)


def count(conn: Connection, plan: Plan) -> dict[str, int]:
    """How many rows of each kind the plan deletes (what `gc --dry-run` prints)."""
    counts = {"runs": 0, "traces": 0, "events": 0, "checkpoints": 0, "gates": 0}
    for ids, whole in ((plan.runs, True), (plan.traces, False)):
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            counts["runs" if whole else "traces"] += len(batch)
            counts["events"] += _count(conn, "events", "run_id", batch)
            counts["checkpoints"] += _count(conn, "checkpoints", "thread_id", batch)
            if whole:
                counts["gates"] += _count(conn, "gates", "run_id", batch)
    return counts


def _count(conn: Connection, table: str, column: str, ids: Sequence[str]) -> int:
    return int(
        conn.execute(
            f"SELECT COUNT(*) FROM {table} WHERE {column} IN ({_marks(ids)})", tuple(ids)
        ).fetchone()[0]
    )


def deleting(
    ids: Sequence[str],
    *,
    whole: bool,
    statuses: Sequence[str] = (RunStatus.FINISHED, *ENDED_BADLY),
) -> Callable[[Connection], dict[str, int]]:
    """A writer call that deletes one batch of runs (`whole`), or only their traces and
    checkpoints; returns the rows deleted per kind. Only runs in one of `statuses` (ended, by
    default): runs that changed meanwhile (a failed run that someone resumed) are left alone, the
    status checked again in the transaction."""

    def apply(conn: Connection) -> dict[str, int]:
        marks = _marks(ids)
        # only runs still in a state the plan chose them in: a resume may have begun since
        # SQLite: the transaction holds the write lock already
        lock = "" if _sqlite(conn) else " FOR UPDATE"
        kept = [
            row[0]
            for row in conn.execute(
                f"SELECT id FROM runs WHERE id IN ({marks}) AND status IN ({_marks(statuses)}){lock}",
                (*ids, *statuses),
            )
        ]
        done = {"runs": 0, "events": 0, "checkpoints": 0, "gates": 0}
        if not kept:
            return done
        marks = _marks(kept)
        params = tuple(kept)
        done["events"] = conn.execute(
            f"DELETE FROM events WHERE run_id IN ({marks})", params
        ).rowcount
        for table in CHECKPOINT_TABLES[backend_of(conn)]:
            deleted = conn.execute(
                f"DELETE FROM {table} WHERE thread_id IN ({marks})", params
            ).rowcount
            if table == "checkpoints":
                done["checkpoints"] = deleted
        if whole:
            done["gates"] = conn.execute(
                f"DELETE FROM gates WHERE run_id IN ({marks})", params
            ).rowcount
            done["runs"] = conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", params).rowcount
        return done

    return apply


def batches(plan: Plan) -> list[tuple[list[str], bool]]:
    """The plan in batches of at most BATCH runs: (ids, whole)."""
    return [
        (ids[start : start + BATCH], whole)
        for ids, whole in ((plan.runs, True), (plan.traces, False))
        for start in range(0, len(ids), BATCH)
    ]


def reclaim(conn: Connection) -> None:
    """Give the pages freed by deleting back to the file system (SQLite: VACUUM, which rewrites the
    file and needs no other transaction on this connection). Postgres reuses them on its own."""
    if _sqlite(conn):
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def free_share(conn: Connection) -> float:
    """SQLite: the share of the file's pages that are free (what VACUUM would give back)."""
    if not _sqlite(conn):
        return 0.0
    pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    return free / pages if pages else 0.0


# ---- one collection ---------------------------------------------------------------------------

VACUUM_SHARE = 0.1  # `gc` rewrites a SQLite file when at least this share of its pages is free


@dataclass(frozen=True)
class Report:
    """What one collection deleted (or, with `dry_run`, would delete), and the database's size."""

    counts: dict[str, int]
    dry_run: bool
    bytes_before: int
    bytes_after: int
    vacuumed: bool = False


def collect(
    location: Location,
    policy: Policy,
    now: datetime,
    *,
    dry_run: bool = False,
    vacuum: bool | None = None,
) -> Report:
    """Delete what `policy` no longer keeps at `now`, batch by batch. `vacuum`: SQLite only — True
    always rewrites the file afterwards, None when at least VACUUM_SHARE of it is free pages, False
    never (freed pages are reused by new rows all the same)."""
    with backends.reading(location) as conn:
        if conn is None:  # no SQLite file yet: nothing to collect
            return Report(
                dict.fromkeys(("runs", "traces", "events", "checkpoints", "gates"), 0),
                dry_run,
                0,
                0,
            )
        before = size(conn)
        chosen = plan(conn, policy, now)
        if dry_run:
            return Report(count(conn, chosen), True, before, before)
    counts = {"runs": 0, "traces": 0, "events": 0, "checkpoints": 0, "gates": 0}
    for ids, whole in batches(chosen):
        with _writing(location) as conn:
            done = deleting(ids, whole=whole)(conn)
        for kind, number in done.items():
            counts[kind] += number
        if not whole:
            counts["traces"] += len(ids)
    vacuumed = False
    with backends.reading(location) as conn:
        assert conn is not None
        if _sqlite(conn) and (vacuum or (vacuum is None and free_share(conn) >= VACUUM_SHARE)):
            reclaim(conn)
            vacuumed = True
        after = size(conn)
    return Report(counts, False, before, after, vacuumed)


@contextmanager
def _writing(location: Location) -> Iterator[Connection]:
    """A connection whose statements in the block are one write transaction (on SQLite taken with
    BEGIN IMMEDIATE: the write lock first, as every writer of the file does)."""
    if location.url is not None:
        with backends.transaction(location) as pg:
            yield pg
        return
    conn = database.open_database(location.path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()


def size(conn: Connection) -> int:
    """The database's size in bytes: a SQLite file's pages in use and free (its WAL aside), a
    Postgres database's as the server counts it."""
    if _sqlite(conn):
        return int(conn.execute("PRAGMA page_count").fetchone()[0]) * int(
            conn.execute("PRAGMA page_size").fetchone()[0]
        )
    return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
