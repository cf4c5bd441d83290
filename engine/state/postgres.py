"""The state database on a Postgres server: connections, the SQL dialect, errors, migrations.

The table modules (`store.py`, `gates.py`, `threads.py`, `messages.py`) write their SQL once, in
SQLite's words (`?` placeholders, `INSERT OR IGNORE`, `INSERT OR REPLACE`, `IS ?`); a `PgConnection`
takes the same statements and translates each (once: cached) to Postgres's. SQL that is already
Postgres's (LangGraph's checkpointer statements, with `%s`) is marked `Native` and passes as it is.
Every psycopg error leaves a `PgConnection` as the engine's own (`BackendError`,
`BackendIntegrityError`; a lost or refused connection as a `StateError`), with the URL's password
masked, so the runtime catches one kind of error whatever the backend.

A session the server ended (a restart, a failover, an administrator, IDLE_IN_TRANSACTION past a
frozen process) leaves its `PgConnection` `broken` for good: psycopg never reconnects by itself.
Its owner replaces the session where that is safe — the writer before a batch, through the factory
that opened it (engine/state/writer.py, `lost`), the reader before a read, with `reopen`
(engine/state/pgsaver.py) — never in the middle of a transaction, whose statements would otherwise
go on, one by one and committed each on its own, on a new session.

Migrations run at start under an advisory lock: two servers starting at once on an empty database
take turns, and the second finds the work done (`prepare`).

Rows added to the trace (`events`) are announced with `NOTIFY blockyard_events, '<run id> <run id> ...'` in
the transaction that adds them, so the notification goes out when they are committed; servers
sharing the database (replicas) `LISTEN` (`listen_events`) to wake the followers of a run another
replica executes (engine/serve/broker.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from engine.core.redaction import mask_url
from engine.state import migrations
from engine.state.database import BackendError, BackendIntegrityError, Native, StateError

# keys of pg_advisory_lock: who migrates (arbitrary, fixed numbers; "blockyard" in ASCII, + 1)
MIGRATE_LOCK = 0x626C6F636B79
SETUP_LOCK = MIGRATE_LOCK + 1
CONNECT_TIMEOUT = 10  # seconds
# A session left idle inside a transaction this long is ended by the server, releasing its locks. Our
# transactions send their statements back to back, so only a process frozen mid-transaction (SIGSTOP,
# a paused VM) leaves one open: its row lock on a run would stop another replica from taking the run
# over for as long as it stays frozen (docs/postgres.md, "How a takeover happens").
IDLE_IN_TRANSACTION = 10  # seconds


EVENTS_CHANNEL = "blockyard_events"
# a run stopped running (its execution ended: finished, failed, waiting, interrupted): a slot of
# the global limit may be free (engine/serve/server.py, `_admit`)
SLOTS_CHANNEL = "blockyard_slots"
# runs should stop: the replica that holds them cancels them (turns superseded by a newer one of their
# thread, `multitask_strategy: interrupt` or `rollback`, or a client's cancel sent to another replica);
# what the payload says is engine/serve/cancels.py's business
CANCELS_CHANNEL = "blockyard_cancels"
_RUN_ENDS = re.compile(r"^\s*UPDATE runs SET status = \?, outputs = \?", re.IGNORECASE)
_EVENTS_INSERT = re.compile(
    r"^\s*INSERT (OR REPLACE |OR IGNORE )?INTO events \(run_id,", re.IGNORECASE
)
_NOTIFY = Native("SELECT pg_notify(%s, %s)")
# A commit's runs whose trace grew are named together, space-separated (run ids have no spaces:
# engine/state/ids.py), in as few notifications as Postgres's payload limit (8,000 bytes) allows: every
# server that LISTENs receives and reads each notification, its own commits' included, so one per run
# (a group commit of 64 runs in flight carries the trace rows of about ten) cost each replica a
# wake-up per run and commit.
_PAYLOAD_BYTES = 7900

# the key of each table that SQLite's INSERT OR REPLACE is used on (ON CONFLICT needs it)
_KEYS = {"events": ("run_id", "seq"), "inline_steps": ("thread_id", "checkpoint_ns", "seq")}
_REPLACE = re.compile(r"^\s*INSERT OR REPLACE INTO (\w+) \(([^)]*)\)", re.IGNORECASE)


@lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """A statement in SQLite's words, in Postgres's."""
    text = sql
    suffix = ""
    replace = _REPLACE.match(text)
    if replace is not None:
        table, columns = replace.group(1), [c.strip() for c in replace.group(2).split(",")]
        keys = _KEYS.get(table)
        if keys is None:
            raise ValueError(
                f"INSERT OR REPLACE INTO {table}: no key known for Postgres's ON CONFLICT"
            )
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in keys)
        text = re.sub(r"INSERT OR REPLACE INTO", "INSERT INTO", text, count=1, flags=re.IGNORECASE)
        suffix = f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    elif re.match(r"^\s*INSERT OR IGNORE INTO", text, re.IGNORECASE):
        text = re.sub(r"INSERT OR IGNORE INTO", "INSERT INTO", text, count=1, flags=re.IGNORECASE)
        suffix = " ON CONFLICT DO NOTHING"
    if re.match(r"^\s*BEGIN IMMEDIATE\s*$", text, re.IGNORECASE):
        return "BEGIN"
    text = re.sub(r"\bIS \?", "IS NOT DISTINCT FROM ?", text)
    text = re.sub(r"\)\s*WITHOUT ROWID", ")", text)
    text = re.sub(r"\bREAL\b", "DOUBLE PRECISION", text)
    text = re.sub(r"\bBLOB\b", "BYTEA", text)
    text = text.replace("%", "%%").replace("?", "%s")
    return text + suffix


def payloads(run_ids: Iterable[str]) -> Iterator[str]:
    """The notifications' payloads that name `run_ids` (each once): space-separated, under Postgres's
    limit each."""
    names: list[str] = []
    size = 0
    for run_id in dict.fromkeys(run_ids):
        if names and size + 1 + len(run_id) > _PAYLOAD_BYTES:
            yield " ".join(names)
            names, size = [], 0
        names.append(run_id)
        size += len(run_id) + 1
    if names:
        yield " ".join(names)


def _sql(sql: str) -> Any:
    return sql if isinstance(sql, Native) else translate(sql)


def explained(exc: psycopg.Error, url: str) -> Exception:
    """A psycopg error as the engine's own (see the module's docstring), the URL's password masked."""
    message = mask_url(str(exc).strip())
    if isinstance(exc, pg_errors.IntegrityError):
        return BackendIntegrityError(message)
    if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, pg_errors.QueryCanceled):
        return StateError(f"the state database {mask_url(url)} cannot be used: {message}")
    return BackendError(message)


# statements of an executemany are sent in messages of about this many characters
BATCH_CHARS = 1 << 20


@dataclass(frozen=True)
class Batch:
    """What an executemany did: the rows its statements changed, together (as psycopg's own reports it)."""

    rowcount: int


def _batches(sizes: list[int], limit: int) -> Iterator[tuple[int, int]]:
    """(start, end) ranges of consecutive statements whose sizes add up to about `limit` (at least one each)."""
    start, total = 0, 0
    for index, size in enumerate(sizes):
        if index > start and total + size > limit:
            yield start, index
            start, total = index, 0
        total += size
    if start < len(sizes):
        yield start, len(sizes)


class PgConnection:
    """A psycopg connection (autocommit: transactions are explicit, as on SQLite) that takes the
    table modules' SQLite statements (see the module's docstring)."""

    def __init__(self, raw: psycopg.Connection[Any], url: str) -> None:
        self.raw = raw
        self.url = url
        self._closed = False  # closed by us (`close`): not `broken`

    @property
    def broken(self) -> bool:
        """Whether the session was lost rather than closed by us: the server ended it, or the link to it
        failed. psycopg learns it on the next statement, which fails (a `StateError`); every statement
        after it fails the same way until the session is replaced (`reopen`)."""
        return not self._closed and self.raw.closed

    def reopen(self) -> None:
        """A new session in place of a lost one. Only between transactions: what a transaction had sent
        on the old session is gone with it (rolled back by the server, or committed if its COMMIT got
        there), and nothing here sends it again. A server still out of reach is a `StateError`, and
        leaves this connection broken, to be tried again."""
        raw = connect_raw(self.url)
        old, self.raw = self.raw, raw
        with contextlib.suppress(psycopg.Error):
            old.close()

    def execute(self, sql: str, parameters: Any = (), /) -> psycopg.Cursor[Any]:
        try:
            cursor = self.raw.execute(_sql(sql), parameters or None)
            if _EVENTS_INSERT.match(sql):
                self._announce([parameters[0]])
            # one notification per transaction: Postgres folds equal ones
            elif _RUN_ENDS.match(sql):
                self.raw.execute(_NOTIFY, (SLOTS_CHANNEL, ""))
            return cursor
        except psycopg.Error as exc:
            raise explained(exc, self.url) from None

    def _announce(self, run_ids: Iterable[str]) -> None:
        """NOTIFY the runs whose trace grew (sent when the transaction commits)."""
        for payload in payloads(run_ids):
            self.raw.execute(_NOTIFY, (EVENTS_CHANNEL, payload))

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Batch:
        """The statement once per row of parameters (see `script`)."""
        return Batch(sum(self.script([(sql, list(parameters))])))

    def script(self, statements: Sequence[tuple[str, Sequence[Any]]], /) -> list[int]:
        """Each statement once per row of its parameters, in order, sent as few messages of many
        statements (client-side binding: the simple query protocol); the rows each statement changed
        over all its rows. The writer sends a whole batch of runs' writes this way: a round trip per
        statement held its thread, and every step waiting for the commit, while the server answered.

        Not psycopg's `executemany`, which pipelines the rows: between them the server waits for the
        rest of the pipeline as an *active* session, and a process frozen there (SIGSTOP, a paused VM)
        would hold its transaction's row locks for as long as it stays frozen, past
        IDLE_IN_TRANSACTION. A message of statements ends with the server idle in the transaction.
        A statement that fails stops the message there; the transaction it was in is then aborted."""
        cursor = psycopg.ClientCursor(self.raw)
        try:
            texts: list[str] = []
            owners: list[int] = []  # the index in `statements` of each of `texts`
            grown: list[str] = []  # runs whose trace grew
            slots = False
            for index, (sql, rows) in enumerate(statements):
                query = _sql(sql)
                for row in rows:
                    texts.append(cursor.mogrify(query, row))
                    owners.append(index)
                if _EVENTS_INSERT.match(sql):
                    grown.extend(row[0] for row in rows)
                # one notification per transaction: Postgres folds equal ones
                elif rows and _RUN_ENDS.match(sql):
                    slots = True
            # the notifications ride in the message of the last rows (sent when the transaction
            # commits), their results not counted as changes
            tail = [cursor.mogrify(_NOTIFY, (EVENTS_CHANNEL, names)) for names in payloads(grown)]
            if slots:
                tail.append(cursor.mogrify(_NOTIFY, (SLOTS_CHANNEL, "")))
            counts = [0] * len(statements)
            for start, end in _batches([len(text) for text in texts], BATCH_CHARS):
                cursor.execute(
                    ";\n".join([*texts[start:end], *(tail if end == len(texts) else [])])
                )
                for position in range(start, end):
                    if position > start:
                        cursor.nextset()
                    counts[owners[position]] += max(cursor.rowcount, 0)
                while cursor.nextset():  # the notifications'
                    pass
            return counts
        except psycopg.Error as exc:
            raise explained(exc, self.url) from None
        finally:
            cursor.close()

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    @contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """BEGIN ... COMMIT (ROLLBACK on an error) around the block."""
        self.execute("BEGIN")
        try:
            yield self
        except BaseException:
            if self.in_transaction:
                self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def close(self) -> None:
        self._closed = True
        self.raw.close()


def connect_raw(url: str, *, dict_rows: bool = False) -> psycopg.Connection[Any]:
    """A psycopg connection in autocommit mode; a server that cannot be reached is a `StateError`."""
    try:
        options = f"-c idle_in_transaction_session_timeout={int(IDLE_IN_TRANSACTION * 1000)}"
        if dict_rows:
            return psycopg.connect(
                url,
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
                connect_timeout=CONNECT_TIMEOUT,
                options=options,
            )
        return psycopg.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT, options=options
        )
    except psycopg.Error as exc:
        raise StateError(
            f"cannot connect to the state database {mask_url(url)}: {mask_url(str(exc).strip())}"
        ) from None


def connect(url: str) -> PgConnection:
    return PgConnection(connect_raw(url), url)


# ---- migrations ------------------------------------------------------------------------------

_lock = threading.Lock()


def migrate(conn: PgConnection, now: str) -> None:
    """Bring Blockyard's tables to migrations.SCHEMA_VERSION in one transaction under
    pg_advisory_xact_lock: servers starting at once apply each migration once."""
    if _applied(conn) == migrations.SCHEMA_VERSION:
        return
    with conn.transaction():
        conn.execute(Native("SELECT pg_advisory_xact_lock(%s)"), (MIGRATE_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS blockyard_migrations (version INTEGER PRIMARY KEY, "
            "applied TEXT NOT NULL)"
        )
        current = _applied(conn)
        for version, statements in migrations.MIGRATIONS:
            if version <= current:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO blockyard_migrations (version, applied) VALUES (?, ?)", (version, now)
            )
    migrations.check_version(_applied(conn))


def _applied(conn: PgConnection) -> int:
    row = conn.execute(Native("SELECT to_regclass('blockyard_migrations') IS NOT NULL")).fetchone()
    if row is None or not row[0]:
        return 0
    found = conn.execute("SELECT COALESCE(MAX(version), 0) FROM blockyard_migrations").fetchone()
    return int(found[0]) if found is not None else 0


@contextmanager
def setup_lock(conn: PgConnection) -> Iterator[None]:
    """A session-level advisory lock around LangGraph's own setup (its checkpointer's and its
    store's migrations): they run outside a transaction (CREATE INDEX CONCURRENTLY), so
    pg_advisory_xact_lock cannot hold them; this lock makes two servers take turns all the same."""
    conn.execute(Native("SELECT pg_advisory_lock(%s)"), (SETUP_LOCK,))
    try:
        yield
    finally:
        conn.execute(Native("SELECT pg_advisory_unlock(%s)"), (SETUP_LOCK,))


# ---- notifications ---------------------------------------------------------------------------


async def listen_events(
    url: str,
    on_run: Callable[[str], None],
    stop: asyncio.Event,
    on_slot: Callable[[], None] | None = None,
    on_cancel: Callable[[str], None] | None = None,
) -> None:
    """Call `on_run(run_id)` (on this event loop) whenever another connection commits events of a
    run, `on_slot()` when one ends a run's execution, and `on_cancel(payload)` when one asks that
    runs stop (engine/state/backends.py, `cancel_request`), until `stop` is set. A lost
    connection is retried; meanwhile followers poll the trace (and waiters for a slot try again now
    and then); a cancel asked meanwhile is lost, and whoever asked it sees the run still running
    when its wait runs out."""
    while not stop.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            ) as conn:
                await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                if on_slot is not None:
                    await conn.execute(f"LISTEN {SLOTS_CHANNEL}")
                if on_cancel is not None:
                    await conn.execute(f"LISTEN {CANCELS_CHANNEL}")
                async for notice in conn.notifies():
                    if notice.channel == SLOTS_CHANNEL:
                        if on_slot is not None:
                            on_slot()
                    elif notice.channel == CANCELS_CHANNEL:
                        if on_cancel is not None:
                            on_cancel(notice.payload)
                    else:
                        for run_id in notice.payload.split():
                            on_run(run_id)
                    if stop.is_set():
                        return
        except psycopg.Error:
            try:
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            except TimeoutError:
                continue
