"""Opening the state database for a look, whatever its backend: the readers of the CLI's commands
(`runs`, `gates`, `threads`, `db status`) and the server's checks. The engine's own handle is
`StateDB` (engine/state/checkpointer.py), which picks the backend the same way: by the `Location`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from engine.core.events import now_iso
from engine.state import database, migrations, store
from engine.state.database import Connection
from engine.state.location import Location
from engine.state.writer import Write

COUNTED = ("runs", "threads", "messages", "gates")


class StatusDict(TypedDict):
    """A `Status` as JSON data (`blockyard db status --json`)."""

    backend: str
    location: str
    schema_version: int
    counts: dict[str, int]


@dataclass(frozen=True)
class Status:
    """What `blockyard db status` shows."""

    backend: str
    location: str  # the file, or the URL with its password masked
    schema_version: int
    counts: dict[str, int]

    def as_dict(self) -> StatusDict:
        return {
            "backend": self.backend,
            "location": self.location,
            "schema_version": self.schema_version,
            "counts": dict(self.counts),
        }


def count_rows(conn: Connection, table: str) -> int:
    return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _has_table(conn: Connection, location: Location, table: str) -> bool:
    if location.url is None:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    else:
        sql = "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
    return conn.execute(sql, (table,)).fetchone() is not None


def status(conn: Connection | None, location: Location) -> Status:
    """The backend, schema version and how many runs, threads, messages, gates and memory items
    the database holds (all 0 for a SQLite file that does not exist yet)."""
    if conn is None:
        return Status(
            location.backend, location.shown, 0, {name: 0 for name in (*COUNTED, "memory")}
        )
    version = int(
        conn.execute("SELECT COALESCE(MAX(version), 0) FROM blockyard_migrations").fetchone()[0]
    )
    counts = {name: count_rows(conn, name) for name in COUNTED}
    counts["memory"] = count_rows(conn, "store") if _has_table(conn, location, "store") else 0
    return Status(location.backend, location.shown, version, counts)


def _location(where: Path | Location) -> Location:
    return where if isinstance(where, Location) else Location(where)


def open_existing(where: Path | Location) -> Connection | None:
    """A connection to the migrated tables for commands that only look; None when there is no
    SQLite file yet (a Postgres database always exists: its server is asked)."""
    location = _location(where)
    if location.url is None:
        return store.open_existing(location.path)
    # psycopg: loaded only for a Postgres database
    from engine.state.postgres import connect, migrate

    conn = connect(location.url)
    try:
        migrate(conn, now_iso())
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def reading(where: Path | Location) -> Iterator[Connection | None]:
    """`open_existing` for the length of a block, whose reads meet a damaged SQLite file as a clear
    `StateError` (the one reader of both backends: `runs`, `gates`, `threads`, `db status`, `stats`)."""
    location = _location(where)
    found = open_existing(location)
    try:
        # a damaged page can turn up at any read, not only while the file is opened
        with database.guard(location.path) if location.url is None else nullcontext():
            yield found
    finally:
        if found is not None:
            found.close()


@contextmanager
def transaction(where: Path | Location) -> Iterator[Connection]:
    """A connection whose statements in the block commit together (or not at all), on tables migrated
    first on either backend: the migrations (engine/state/migrations.py) are the one definition of
    every table, also for a file an older blockyard left behind."""
    location = _location(where)
    if location.url is None:
        # autocommit: `migrate` takes its own write lock
        conn = database.open_database(location.path)
        try:
            with database.guard(location.path):
                migrations.migrate(conn, now_iso())
            conn.isolation_level = (
                "DEFERRED"  # then the block's statements are one transaction (`with conn`)
            )
            with conn:
                yield conn
        finally:
            conn.close()
        return
    # psycopg: loaded only for a Postgres database
    from engine.state.postgres import connect, migrate

    pg = connect(location.url)
    try:
        migrate(pg, now_iso())
        with pg.transaction():
            yield pg
    finally:
        pg.close()


def check(where: Path | Location) -> None:
    """Refuse a state database that cannot be used (a damaged file, a server that refuses us) before
    a server binds its port."""
    location = _location(where)
    if location.url is None:
        conn = database.open_database(location.path)
        try:
            with database.guard(location.path):
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
        return
    with reading(location):
        pass


async def listen_events(
    where: Path | Location,
    on_run: Callable[[str], None],
    stop: asyncio.Event,
    on_slot: Callable[[], None] | None = None,
    on_cancel: Callable[[str], None] | None = None,
) -> None:
    """Call `on_run(run_id)` when another process commits events of a run, `on_slot()` when a run
    stops running anywhere (a slot of the global limit may be free), and `on_cancel(payload)` when a
    process asks that runs stop (`cancel_request`): Postgres's LISTEN/NOTIFY
    (engine/state/postgres.py). A SQLite file has no such thing: followers poll it, and this returns."""
    location = _location(where)
    if location.url is None:
        return
    # psycopg: loaded only for a Postgres database
    from engine.state.postgres import listen_events as listen

    await listen(location.url, on_run, stop, on_slot, on_cancel)


def cancel_request(where: Path | Location, payload: str) -> Write | None:
    """A write that asks every process listening (`listen_events`) to stop the runs `payload` names
    (engine/serve/cancels.py): on Postgres a NOTIFY, sent when the write commits; None on a SQLite
    file, whose processes share no such channel."""
    if _location(where).url is None:
        return None
    # psycopg: loaded only for a Postgres database
    from engine.state.postgres import CANCELS_CHANNEL

    return Write("SELECT pg_notify(?, ?)", (CANCELS_CHANNEL, payload))
