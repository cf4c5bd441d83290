"""The `messages` table: every conversation thread's messages, in order, for people and UIs.

A thread keeps its conversation twice, on purpose (docs/memory.md, "Where a conversation lives"):
the checkpointed state is what the thread's models are sent, this table is what `blockyard
threads show` and the HTTP API read (paged, with plain SQL and no LangGraph). Both are written in
the one transaction that ends a turn — its reply checkpoint, its two rows here, the run's new
status — so they can never disagree, whatever crashes when.

A finished turn adds exactly two rows: `user` (the turn's message) and `assistant` (its reply,
linked to the run that made it: `run_id` leads to the turn's trace). Turns that fail or are
abandoned add nothing. A thread whose turns branch (engine/state/branches.py) keeps each turn's rows once;
its readers are shown the head branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from engine.state import branches
from engine.state.database import Connection
from engine.state.writer import Write

PAGE = 50  # messages per page unless asked otherwise
MAX_PAGE = 1000
_COLUMNS = "SELECT thread_id, idx, role, content, run_id, created FROM messages"
_ON_PATH = "run_id IN (SELECT id FROM path)"  # the rows of the turns on a branch (engine/state/branches.py)


class MessageDict(TypedDict):
    """A `Message` as JSON data (`blockyard threads show --json`)."""

    thread_id: str
    index: int
    role: str
    content: str
    run_id: str
    created: str


@dataclass(frozen=True)
class Message:
    """One row of `messages`: `index` counts from 0 in the thread."""

    thread_id: str
    index: int
    role: str  # user | assistant
    content: str
    run_id: str
    created: str

    def as_dict(self) -> MessageDict:
        return {
            "thread_id": self.thread_id,
            "index": self.index,
            "role": self.role,
            "content": self.content,
            "run_id": self.run_id,
            "created": self.created,
        }


def append_turn(thread_id: str, run_id: str, said: str, reply: str, now: str) -> Write:
    """The two rows of a finished turn, numbered after the thread's last one. A turn's rows are
    written once: a second attempt (the same run) is ignored, not appended again."""
    return Write(
        "INSERT OR IGNORE INTO messages (thread_id, idx, role, content, run_id, created) "
        "SELECT ?, COALESCE((SELECT MAX(idx) FROM messages WHERE thread_id = ?), -1) + ?, ?, ?, ?, ? "
        "WHERE NOT EXISTS (SELECT 1 FROM messages WHERE run_id = ? AND role = ?)",
        [
            (thread_id, thread_id, 1, role, text, run_id, now, run_id, role)
            for role, text in (("user", said), ("assistant", reply))
        ],
        many=True,
    )


def delete_thread(thread_id: str) -> Write:
    return Write("DELETE FROM messages WHERE thread_id = ?", (thread_id,))


# ---- reading ----------------------------------------------------------------------------------


def history(
    conn: Connection,
    thread_id: str,
    *,
    after: int | None = None,
    limit: int = PAGE,
    newest: bool = False,
) -> list[Message]:
    """A page of a thread's messages in order — of its head branch, when its turns branched
    (engine/state/branches.py): those after index `after` (from the first without), at most `limit`;
    with `newest`, the last `limit` ones (before `after`, when given) — a chat view opens at the end and
    pages back."""
    limit = max(1, min(int(limit), MAX_PAGE))
    select, first = _seen(conn, thread_id, _COLUMNS)
    if newest:
        sql = select + (" AND idx < ?" if after is not None else "") + " ORDER BY idx DESC LIMIT ?"
        params: tuple[Any, ...] = (*first, after, limit) if after is not None else (*first, limit)
        return [Message(*row) for row in reversed(conn.execute(sql, params).fetchall())]
    rows = conn.execute(
        select + " AND idx > ? ORDER BY idx LIMIT ?",
        (*first, -1 if after is None else after, limit),
    )
    return [Message(*row) for row in rows]


def _seen(conn: Connection, thread_id: str, select: str) -> tuple[str, tuple[str, ...]]:
    """`select` (of `messages`) over the thread's rows people see, and its first parameters: every row
    of a thread that never branched (each turn went on from the one before), else the head branch's."""
    if not branches.branched(conn, thread_id):
        return f"{select} WHERE thread_id = ?", (thread_id,)
    return branches.on_head(f"{select} WHERE thread_id = ? AND {_ON_PATH}"), (thread_id, thread_id)


def of_branch(conn: Connection, thread_id: str, turn: str) -> list[Message]:
    """The messages of the branch ending at finished turn `turn`, in order."""
    sql = branches.on_path(f"{_COLUMNS} WHERE thread_id = ? AND {_ON_PATH} ORDER BY idx")
    return [Message(*row) for row in conn.execute(sql, (turn, thread_id))]


def count(conn: Connection, thread_id: str) -> int:
    """The thread's messages people see (`history`'s)."""
    sql, params = _seen(conn, thread_id, "SELECT COUNT(*) FROM messages")
    return int(conn.execute(sql, params).fetchone()[0])


def of_run(conn: Connection, run_id: str) -> list[Message]:
    """The messages a turn added (none until it finished): its message, then its reply."""
    rows = conn.execute(
        "SELECT thread_id, idx, role, content, run_id, created FROM messages WHERE run_id = ? "
        "ORDER BY idx",
        (run_id,),
    )
    return [Message(*row) for row in rows]
