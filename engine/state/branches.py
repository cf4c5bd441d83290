"""Branches of a conversation thread: a turn may go on from any finished turn of its thread, not only
its latest — an edited message, a regenerated answer (docs/memory.md, "Branches").

Each turn records the finished turn it went on from (`runs.after_turn`, set when the thread admits it,
engine/state/threads.py; NULL for the first turn of a branch). A branch is the path of turns from its
newest back to a first one; its messages are the `messages` rows of the turns on that path, each stored
once however many branches share it. The thread's head is its latest finished turn (the newest rows of
`messages`): the branch people are shown, and the one its checkpoint holds. A plain next turn goes on from
the latest turn, or the one it went on from when it did not finish (`latest`): usually the head. A thread
remembers whether it ever branched (`threads.branched`): one that never did is a single path, read as
before.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.errors import UsageError
from engine.state.database import Connection

START = "__start__"  # where a branch that goes on from no turn starts: a new first turn


@dataclass(frozen=True)
class TurnStart:
    """Where a new turn of a thread starts: `after`, the finished turn it goes on from (START: none;
    None: the thread's latest); `regenerates`, the turn whose message it says again (a regenerated
    answer, recorded with it: engine/serve/langgraph_api/state.py shows it beside that turn's answer)."""

    after: str | None = None
    regenerates: str | None = None


LATEST = TurnStart()  # a plain turn: it goes on from where the thread is (`latest`)
MAX_DEPTH = 1_000_000  # turns on one path: a guard against a cycle no write makes

# the turns on the path ending at the turn the statement's first parameter names, newest first
_PATH = (
    "WITH RECURSIVE path(id, depth) AS (SELECT CAST(? AS TEXT), 0 UNION ALL "
    "SELECT runs.after_turn, path.depth + 1 FROM runs JOIN path ON runs.id = path.id "
    f"WHERE runs.after_turn IS NOT NULL AND path.depth < {MAX_DEPTH}) "
)
_HEAD = "SELECT run_id FROM messages WHERE thread_id = ? ORDER BY idx DESC LIMIT 1"


def branched(conn: Connection, thread_id: str) -> bool:
    """Whether a turn of the thread ever went on from another than the thread's head (a thread that never
    branched is one path: every turn went on from the one before, and its readers need no path)."""
    row = conn.execute("SELECT branched FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return bool(row[0]) if row is not None else False


def mark_branched(conn: Connection, thread_id: str) -> None:
    conn.execute("UPDATE threads SET branched = 1 WHERE id = ?", (thread_id,))


def head(conn: Connection, thread_id: str) -> str | None:
    """The thread's latest finished turn; None before one finished."""
    row = conn.execute(_HEAD, (thread_id,)).fetchone()
    return str(row[0]) if row is not None else None


def latest(conn: Connection, thread_id: str) -> str | None:
    """The finished turn a plain turn goes on from: the thread's latest turn, or when that one did not
    finish, the turn it went on from — the branch the thread is on (a failed turn's message is in no
    conversation). A latest turn recorded before branches (no `after_turn`) leaves the head."""
    row = conn.execute(
        "SELECT runs.id, runs.after_turn, messages.run_id FROM threads JOIN runs ON runs.id = threads.last_run "
        "LEFT JOIN messages ON messages.run_id = runs.id AND messages.role = 'user' WHERE threads.id = ?",
        (thread_id,),
    ).fetchone()
    if row is not None and row[2] is not None:
        return str(row[0])
    if row is not None and row[1] is not None:
        return str(row[1])
    return head(conn, thread_id)


def on_path(select: str) -> str:
    """`select` (a statement whose first parameter is a turn's run id, then its own) restricted by
    `run_id IN (SELECT id FROM path)` to the turns on that turn's branch."""
    return _PATH + select


def on_head(select: str) -> str:
    """`select` over the head's branch: its first parameter is the thread's id, then its own."""
    return _PATH.replace("CAST(? AS TEXT)", f"({_HEAD})", 1) + select


def path(conn: Connection, turn: str) -> list[str]:
    """The turns on the branch ending at `turn`, oldest first (`turn` last)."""
    rows = conn.execute(on_path("SELECT id FROM path ORDER BY depth DESC"), (turn,)).fetchall()
    return [str(row[0]) for row in rows]


def turns_on(conn: Connection, turn: str | None) -> int:
    """How many turns the branch ending at `turn` holds (0 for None)."""
    if turn is None:
        return 0
    return int(conn.execute(on_path("SELECT COUNT(*) FROM path"), (turn,)).fetchone()[0])


def start_point(conn: Connection, thread_id: str, wanted: str) -> str | None:
    """The finished turn a new turn that asks to go on from `wanted` (a turn's run id, or START) goes
    on from: None for START. UsageError when `wanted` is no finished turn of the thread."""
    if wanted == START:
        return None
    row = conn.execute(
        "SELECT runs.thread_id, messages.run_id FROM runs LEFT JOIN messages "
        "ON messages.run_id = runs.id AND messages.role = 'user' WHERE runs.id = ?",
        (wanted,),
    ).fetchone()
    if row is None or row[0] != thread_id:
        raise UsageError(f"thread '{thread_id}' has no turn '{wanted}' to go on from")
    if row[1] is None:
        raise UsageError(
            f"turn '{wanted}' of thread '{thread_id}' did not finish: a branch goes on from a "
            "finished turn"
        )
    return wanted
