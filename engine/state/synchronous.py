"""The disk guarantee of a commit (docs/runtime.md, "The disk guarantee"): what an acknowledged
transaction survives.

- `NORMAL` (the default): a crash of the engine's process (kill -9, OOM, Ctrl-C). On SQLite the
  commit is in the WAL, in the operating system's page cache; on Postgres it is in the server's
  memory (`synchronous_commit = off`). A power cut, a kernel panic (or on Postgres a crash of the
  server) may lose the last transactions; the database stays consistent.
- `FULL`: also a power cut. SQLite syncs the WAL at every commit (`PRAGMA synchronous = FULL`);
  Postgres waits for its WAL to be flushed (`synchronous_commit = on`).

A yard has one level (blockyard.yaml's `synchronous:`, or `Yard.load(synchronous=...)`), which the
writer's connection is opened with; a flow may ask for its own (the flow's `synchronous:`). The
writer commits the statements of many runs in one transaction (engine/state/writer.py), so each
transaction gets the strongest level among the writes it carries: a run of a `full` flow beside
runs of `normal` ones still has every one of its commits synced, and theirs ride along.

How a write learns its level: the execution sets it in a context variable for the graph's task
(the checkpointer's writes, made inside LangGraph) and around its own writes (`level`); a write made
outside any run (an API call's) gets the yard's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Protocol

from engine.state.database import Connection

LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")  # SQLite's names, weakest first
DEFAULT = "NORMAL"
# what a level means on Postgres: whether a commit waits for the WAL to reach the disk
_POSTGRES = {"OFF": "off", "NORMAL": "off", "FULL": "on", "EXTRA": "on"}

_LEVEL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "blockyard_synchronous", default=None
)


def checked(level: str) -> str:
    """`level` in SQLite's spelling (upper case); a ValueError naming the choices otherwise."""
    upper = level.upper()
    if upper not in LEVELS:
        raise ValueError(f"synchronous must be one of {', '.join(LEVELS)}, not {level!r}")
    return upper


def current() -> str | None:
    """The level of the writes made here (None: the yard's)."""
    return _LEVEL.get()


def enter(level: str | None) -> None:
    """Give the writes of this task (and of the tasks it starts) `level` (None: the yard's)."""
    _LEVEL.set(level)


@contextlib.contextmanager
def level(wanted: str | None) -> Iterator[None]:
    """Give the writes made inside the block the level `wanted`. Set and reset in the caller's own
    context, so around an `await` of a write only that write sees it."""
    token = _LEVEL.set(wanted)
    try:
        yield
    finally:
        _LEVEL.reset(token)


def strongest(levels: Iterator[str | None], base: str) -> str:
    """The level a transaction carrying writes of `levels` needs: the strongest of them, each None
    being the yard's `base` (a `normal` flow in a `full` yard commits at normal on its own)."""
    rank = -1
    for each in levels:
        rank = max(rank, LEVELS.index(each or base))
    return LEVELS[rank] if rank >= 0 else base


def weak(level: str | None) -> bool:
    """Whether a commit at `level` never waits for the disk (None: decided by the yard's level)."""
    return level is None or LEVELS.index(level) <= LEVELS.index(DEFAULT)


class Levels(Protocol):
    """How a backend gives one transaction a level other than its connection's (the writer calls
    `before` ahead of BEGIN and `inside` right after it)."""

    base: str

    def before(self, conn: Connection, level: str) -> None: ...

    def inside(self, conn: Connection, level: str) -> None: ...


class SqliteLevels:
    """SQLite: `PRAGMA synchronous`, which may change only between transactions; set when a
    transaction needs another level than the one before it."""

    def __init__(self, base: str) -> None:
        self.base = checked(base)
        self._now = self.base

    def before(self, conn: Connection, level: str) -> None:
        if level != self._now:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._now = level

    def inside(self, conn: Connection, level: str) -> None:
        return None


class PostgresLevels:
    """Postgres: the session's `synchronous_commit` is the yard's level (`session`, run on each new
    session); a transaction that needs the other one says `SET LOCAL`, which ends with it."""

    def __init__(self, base: str) -> None:
        self.base = checked(base)

    def session(self, conn: Connection) -> None:
        conn.execute(f"SET synchronous_commit = {_POSTGRES[self.base]}")

    def before(self, conn: Connection, level: str) -> None:
        return None

    def inside(self, conn: Connection, level: str) -> None:
        wanted = _POSTGRES[level]
        if wanted != _POSTGRES[self.base]:
            conn.execute(f"SET LOCAL synchronous_commit = {wanted}")
