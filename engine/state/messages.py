"""The `messages` table: every conversation thread's messages, in order, for people and UIs.

A thread keeps its conversation twice, on purpose (docs/memory.md, "Where a conversation lives"):
the checkpointed state is what the thread's models are sent, this table is what `blockyard
threads show` and the HTTP API read (paged, with plain SQL and no LangGraph). Both are written in
the one transaction that ends a turn — its reply checkpoint, its two rows here, the run's new
status — so they can never disagree, whatever crashes when.

A finished turn adds exactly two rows: `user` (the turn's message) and `assistant` (its reply,
linked to the run that made it: `run_id` leads to the turn's trace). Turns that fail or are
abandoned add nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.state.database import Connection
from engine.state.writer import Write

PAGE = 50  # messages per page unless asked otherwise
MAX_PAGE = 1000


@dataclass(frozen=True)
class Message:
    """One row of `messages`: `index` counts from 0 in the thread."""

    thread_id: str
    index: int
    role: str  # user | assistant
    content: str
    run_id: str
    created: str

    def as_dict(self) -> dict[str, Any]:
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
    """A page of a thread's messages in order: those after index `after` (from the first without),
    at most `limit`; with `newest`, the last `limit` ones (before `after`, when given) — a chat
    view opens at the end and pages back."""
    limit = max(1, min(int(limit), MAX_PAGE))
    if newest:
        sql = (
            "SELECT thread_id, idx, role, content, run_id, created FROM messages WHERE thread_id = ?"
            + (" AND idx < ?" if after is not None else "")
            + " ORDER BY idx DESC LIMIT ?"
        )
        params: tuple[Any, ...] = (
            (thread_id, after, limit) if after is not None else (thread_id, limit)
        )
        return [Message(*row) for row in reversed(conn.execute(sql, params).fetchall())]
    rows = conn.execute(
        "SELECT thread_id, idx, role, content, run_id, created FROM messages "
        "WHERE thread_id = ? AND idx > ? ORDER BY idx LIMIT ?",
        (thread_id, -1 if after is None else after, limit),
    )
    return [Message(*row) for row in rows]


def count(conn: Connection, thread_id: str) -> int:
    return int(
        conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (thread_id,)).fetchone()[
            0
        ]
    )


def of_run(conn: Connection, run_id: str) -> list[Message]:
    """The messages a turn added (none until it finished): its message, then its reply."""
    rows = conn.execute(
        "SELECT thread_id, idx, role, content, run_id, created FROM messages WHERE run_id = ? "
        "ORDER BY idx",
        (run_id,),
    )
    return [Message(*row) for row in rows]
