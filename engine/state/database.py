"""Opening the yard's state database: one way, fit for several processes on one file.

This module is also the one rule for what a failure of the file itself means to a user: another
process holding the write lock too long, or something that is not a usable SQLite database
(garbage, a truncated copy, a directory, no permission). `explain` turns those into clear
`StateError`s (exit 1); anything else SQLite reports (a wrong statement) stays a bug.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from engine.core.errors import BlockyardError, UsageError

TIMEOUT_ENV = "BLOCKYARD_DB_TIMEOUT"
DEFAULT_TIMEOUT = 30.0  # seconds a writer waits for another process's lock

# SQLite's primary result codes (the low byte of an extended code) that say the file cannot be used
_LOCKED = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_UNUSABLE = frozenset(
    {
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_AUTH,
    }
)
_UNWRITABLE = frozenset({sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL})


class StateError(BlockyardError):
    """The state database cannot be used (locked too long, corrupt, not a file, newer schema)."""

    code = "state_unusable"


class BackendError(Exception):
    """A statement failed on a database server (Postgres): the driver's error as the engine's own,
    so that the table modules and the runtime catch one kind of error whatever the backend
    (`DB_ERRORS`). SQLite's own errors stay `sqlite3.Error` (no wrapping on the embedded path)."""


class BackendIntegrityError(BackendError):
    """A key or constraint refused a row (a run id taken): `sqlite3.IntegrityError`'s counterpart."""


# what a statement on the state database can raise, whatever the backend
DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, BackendError)
INTEGRITY_ERRORS: tuple[type[Exception], ...] = (sqlite3.IntegrityError, BackendIntegrityError)


class Cursor(Protocol):
    """What the table modules read from a statement (sqlite3's cursor, or the Postgres adapter's)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection as the table modules use it: sqlite3's, or `engine.state.postgres.PgConnection`,
    which takes the same SQL (`?` placeholders, SQLite's INSERT OR IGNORE/REPLACE) and translates it."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Any: ...

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


@runtime_checkable
class Scripted(Protocol):
    """A connection that sends many statements in one message (a `PgConnection`): a batch's writes
    cost one round trip to the server, not one each (engine/state/writer.py). SQLite's, in the
    process, has no round trips to save."""

    def script(self, statements: Sequence[tuple[str, Sequence[Any]]], /) -> list[int]: ...


class Native(str):
    """SQL already written for the Postgres server (`%s` placeholders): a `PgConnection` passes it as
    it is instead of translating it from SQLite's words (engine/state/postgres.py)."""

    __slots__ = ()


class StateLocked(StateError):
    """Another process held the database's lock for longer than the busy timeout.

    The CLI names the command that waited (`command`), since several may run at once."""

    code = "state_locked"

    def __init__(self, path: Path, waited: float) -> None:
        self.path = path
        self.waited = waited
        self.command: str | None = None
        super().__init__()

    def __str__(self) -> str:
        prefix = f"{self.command}: " if self.command else ""
        return (
            f"{prefix}the state database {self.path} is locked by another process (waited {self.waited:g} s "
            f"for a write lock; {TIMEOUT_ENV}=SECONDS changes how long)"
        )


def busy_timeout() -> float:
    """Seconds to wait for another process's lock: $BLOCKYARD_DB_TIMEOUT, or 30."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise UsageError(f"{TIMEOUT_ENV}='{text}': expected a number of seconds, 0 or more")
    return value


def explain(exc: BaseException, path: Path) -> StateError | None:
    """The user-facing error for a failure of the database file itself; None for anything else."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in _LOCKED:
        try:
            waited = busy_timeout()
        except UsageError:  # cannot happen once a connection was opened; never hide the lock
            waited = DEFAULT_TIMEOUT
        return StateLocked(path, waited)
    if code in _UNUSABLE:
        return StateError(f"cannot open the state database {path}: {exc}")
    if code in _UNWRITABLE:
        return StateError(f"cannot write to the state database {path}: {exc}")
    return None


@contextmanager
def guard(path: Path) -> Iterator[None]:
    """Turn failures of the database file inside the block into `StateError`s (see `explain`)."""
    try:
        yield
    except sqlite3.Error as exc:
        explained = explain(exc, path)
        if explained is None:
            raise
        raise explained from None


def exists(path: Path) -> bool:
    """Whether there is a database at `path` (False: none yet); something else there is an error."""
    if not os.path.lexists(path):
        return False
    if not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise StateError(f"cannot open the state database {path}: it is {what}")
    return True


def open_database(
    path: Path, *, autocommit: bool = True, synchronous: str | None = None
) -> sqlite3.Connection:
    """A connection in WAL mode that waits on busy locks; usable from any thread.

    `autocommit` leaves transactions to explicit BEGIN/COMMIT (sqlite3's isolation_level=None);
    otherwise the sqlite3 module's implicit transactions apply (`with conn:`). A file that is not
    a usable database raises `StateError`.
    """
    timeout = busy_timeout()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(f"cannot open the state database {path}: {exc.strerror or exc}") from None
    exists(path)  # a directory there: SQLite would only say "unable to open database file"
    with guard(path):
        conn = sqlite3.connect(
            path,
            timeout=timeout,
            check_same_thread=False,
            isolation_level=None if autocommit else "DEFERRED",
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            _enable_wal(conn, timeout)
            if synchronous is not None:
                conn.execute(f"PRAGMA synchronous = {synchronous}")
        except BaseException:
            conn.close()
            raise
    return conn


def _enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    # Switching to WAL needs an exclusive lock and SQLite does not wait for it through the busy
    # handler: two processes creating a fresh database at once would see "database is locked".
    deadline = time.monotonic() + timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(0.005 + random.random() * 0.02)
