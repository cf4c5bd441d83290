"""Conversation threads: runs of one flow that share one LangGraph thread, one turn each.

`blockyard run FLOW --thread ID` starts a turn. This module keeps the `threads` table, each thread's
starting point (`threads.checkpoint`: the checkpoint of its last finished turn) and what a turn says
(its text, its reply's text, the thread's title); how a turn starts and ends in the graph — only
what is new goes in, the reply and the turn's two `messages` rows are written with the run's end —
is engine/runtime/turns.py. When a turn finishes, the checkpoints of earlier steps are pruned
(the saver's `prune_writes`, engine/state/checkpointer.py): continuing a thread needs only its
latest checkpoint, and without pruning every step re-stores the whole conversation
(bench/bench_threads.py).


Turns of one thread never overlap: a turn is admitted in the transaction that inserts its run,
and only when no other run of the thread is running (with a live owner) or waiting for approval;
a turn that finds its thread busy waits for it, in this process or another.

A thread is usually created by its first turn; the HTTP API can also create one ahead of its turns
(`create`: an id, and maybe its flow — `flow` is then '' until the first turn names it) and delete
one (`delete`: its rows, messages and checkpoints, in one transaction, while no turn goes on).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.errors import UsageError
from engine.core.events import RunStatus
from engine.core.values import JsonDict
from engine.state import branches, liveness, messages, store
from engine.state.database import Connection
from engine.state.ids import check_run_id
from engine.state.messages import Message
from engine.state.writer import Write

TITLE_WIDTH = 60
POLL = (0.02, 0.5)  # first and longest pause while waiting for a busy thread


@dataclass(frozen=True)
class Thread:
    """One row of `threads`."""

    id: str
    flow: str
    title: str
    created: str
    updated: str
    turns: int
    last_run: str | None
    name: str | None = None  # at most five words (engine/runtime/naming.py); None for older threads

    @property
    def label(self) -> str:
        """What people see a thread as: its name, else (a thread older than names) its title; ''
        for a thread created ahead of its first turn."""
        return self.name or self.title

    def as_dict(self) -> JsonDict:
        """As JSON; `flow` and `name` are None while a thread created ahead of its turns has none."""
        return {
            "id": self.id,
            "flow": self.flow or None,
            "name": self.label or None,
            "title": self.title,
            "created": self.created,
            "updated": self.updated,
            "turns": self.turns,
            "last_run": self.last_run,
        }


def _show(value: Any) -> str:
    return value if isinstance(value, str) else store.dumps(value)


def turn_text(inputs: JsonDict) -> str:
    """What a turn says: its `message` input, else its only input (shown as text), else `key: value`
    lines."""
    if isinstance(inputs.get("message"), str):
        return str(inputs["message"])
    if len(inputs) == 1:
        return _show(next(iter(inputs.values())))
    return "\n".join(f"{key}: {_show(value)}" for key, value in inputs.items())


def reply_text(outputs: JsonDict | None) -> str:
    """A turn's reply: its only output, else `key: value` lines."""
    outputs = outputs or {}
    if len(outputs) == 1:
        return _show(next(iter(outputs.values())))
    return "\n".join(f"{key}: {_show(value)}" for key, value in outputs.items())


def title_of(text: str) -> str:
    """A thread's title: the first line of its first message, shortened."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "") or "(empty)"
    return line if len(line) <= TITLE_WIDTH else line[: TITLE_WIDTH - 1].rstrip() + "…"


# ---- admitting a turn -------------------------------------------------------------------------


def check_thread_id(thread_id: str) -> str:
    """Thread ids follow the rules of run ids: letters, digits, `_`, `.`, `-`; at most 64."""
    try:
        return check_run_id(thread_id)
    except UsageError:
        raise UsageError(
            f"invalid thread id '{thread_id}': use up to 64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        ) from None


LATEST = "*"  # `threads.checkpoint` of a thread older than the messages table: go on from its latest checkpoint


@dataclass(frozen=True)
class Admitted:
    """A turn the thread took: whether it is the thread's first, and the checkpoint of the thread's
    last finished turn (its reply), which the turn starts from: None when no turn has finished yet
    (the turn starts from an empty conversation, whatever a failed turn left), LATEST for a thread
    older than the `messages` table."""

    first: bool
    checkpoint: str | None
    turns_before: int = (
        0  # finished turns before this one on its branch (two rows of `messages` each)
    )
    # a turn that branches (goes on from a finished turn other than the head, engine/state/branches.py):
    # the messages of its branch, which it starts with instead of the checkpoint's; None: it goes on
    # from the head
    branch: tuple[Message, ...] | None = None


def admit(
    thread_id: str,
    flow: str,
    title: str,
    writes: Sequence[Write],
    run_id: str,
    now: str,
    name: str | None = None,
    after: str | None = None,
) -> Callable[[Connection], Admitted | None]:
    """A writer call: when the thread is free, insert the run (`writes`) and count the turn; None
    when another run of the thread is still running; UsageError when the thread cannot take it.
    A new thread is named `name` until its model-given name (engine/runtime/naming.py) replaces it.
    `after`: the finished turn it goes on from (a run id, or branches.START for none), when not the
    thread's head: the turn branches."""

    def apply(conn: Connection) -> Admitted | None:
        # the thread's row first, written or locked: on Postgres two admits of one thread (from two
        # processes) wait here for each other, so the second sees the first's run below; on SQLite
        # the writer's transaction holds the database's write lock already
        conn.execute(
            "INSERT INTO threads (id, flow, title, name, created, updated, turns, last_run) "
            "VALUES (?, ?, ?, ?, ?, ?, 0, NULL) ON CONFLICT(id) DO UPDATE SET turns = threads.turns",
            (thread_id, flow, title, name, now, now),
        )
        row = conn.execute(
            "SELECT flow, checkpoint, turns FROM threads WHERE id = ?", (thread_id,)
        ).fetchone()
        if row[0] not in ("", flow):
            raise UsageError(
                f"thread '{thread_id}' is a conversation with flow '{row[0]}', not '{flow}'"
            )
        held = busy_turn(conn, thread_id)
        if held is not None and held.status == RunStatus.WAITING:
            raise UsageError(
                f"thread '{thread_id}' waits for an approval in run {held.run_id}: decide it first "
                f"(`blockyard resume {held.run_id} --approve` or `--reject`)"
            )
        if held is not None:
            return None
        # the turn the thread's checkpoint is the end of, and the one a plain turn goes on from
        checkpointed = branches.head(conn, thread_id)
        latest = branches.latest(conn, thread_id)
        parent = latest if after is None else branches.start_point(conn, thread_id, after)
        for write in writes:
            if write.many:
                conn.executemany(write.sql, write.params)
            else:
                conn.execute(write.sql, write.params)
        conn.execute("UPDATE runs SET after_turn = ? WHERE id = ?", (parent, run_id))
        # a thread created ahead of its turns (`create`) gets its flow, title and name from its first one
        conn.execute(
            "INSERT INTO threads (id, flow, title, name, created, updated, turns, last_run) "
            "VALUES (?, ?, ?, ?, ?, ?, 1, ?) "
            "ON CONFLICT(id) DO UPDATE SET updated = excluded.updated, turns = threads.turns + 1, "
            "last_run = excluded.last_run, flow = excluded.flow, "
            "title = CASE WHEN threads.turns = 0 THEN excluded.title ELSE threads.title END, "
            "name = CASE WHEN threads.turns = 0 THEN excluded.name ELSE threads.name END",
            (thread_id, flow, title, name, now, now, run_id),
        )
        if row[2] == 0:
            return Admitted(first=True, checkpoint=None)
        return _start(conn, thread_id, row[1], parent, checkpointed)

    return apply


def _start(
    conn: Connection,
    thread_id: str,
    checkpoint: str | None,
    parent: str | None,
    checkpointed: str | None,
) -> Admitted:
    """Where an admitted turn of a thread with turns starts: from the thread's `checkpoint` when it goes on
    from the turn that checkpoint is the end of (`checkpointed`), else from its branch's messages — a
    branch, or a thread whose finished turns left no checkpoint (a copy, engine/state/thread_copy.py)."""
    if parent == checkpointed and (checkpoint is not None or checkpointed is None):
        return Admitted(
            first=False, checkpoint=checkpoint, turns_before=finished_turns(conn, thread_id)
        )
    if parent != checkpointed:
        branches.mark_branched(conn, thread_id)
    said = tuple(messages.of_branch(conn, thread_id, parent)) if parent is not None else ()
    return Admitted(
        first=False,
        checkpoint=checkpoint,
        turns_before=branches.turns_on(conn, parent),
        branch=said,
    )


async def wait_turn(call: Callable[[], Any], thread_id: str, limit: float = 3600.0) -> Admitted:
    """Call `call()` (an admitting write) until the thread takes the turn."""
    pause, waited = POLL[0], 0.0
    while True:
        admitted: Admitted | None = await call()
        if admitted is not None:
            return admitted
        if waited >= limit:
            raise UsageError(f"thread '{thread_id}' stayed busy for {limit:.0f} s; try again later")
        await asyncio.sleep(pause)
        waited += pause
        pause = min(pause * 2, POLL[1])


def finished_turns(conn: Connection, thread_id: str) -> int:
    """The finished turns of the thread (of its head branch, once it branched)."""
    if branches.branched(conn, thread_id):
        return branches.turns_on(conn, branches.head(conn, thread_id))
    row = conn.execute(
        "SELECT COUNT(*) FROM messages WHERE thread_id = ? AND role = 'user'", (thread_id,)
    ).fetchone()
    return int(row[0])


def check_current(conn: Connection, thread_id: str, run_id: str) -> None:
    """A run of a thread can be resumed only while it is the thread's latest turn (and the thread
    was not deleted: a thread made again under the same id is another conversation)."""
    row = conn.execute("SELECT last_run FROM threads WHERE id = ?", (thread_id,)).fetchone()
    if row is None or row[0] is None:
        raise UsageError(
            f"run {run_id} cannot be resumed: its conversation thread '{thread_id}' was deleted"
        )
    if row[0] != run_id:
        raise UsageError(
            f"run {run_id} cannot be resumed: its conversation thread '{thread_id}' has gone on "
            f"with run {row[0]}"
        )


def roll_back(thread_id: str, run_ids: Sequence[str]) -> Callable[[Connection], int]:
    """A writer call: forget turns of the thread that a newer one superseded (`multitask_strategy:
    rollback`, engine/serve/langgraph_api/runs.py) — their rows, traces, gates and messages — of those
    only the ones recorded interrupted (never a run still going on, nor one that finished: the thread
    goes on from it); the thread's count of turns and its latest turn then say what is left. Returns
    how many runs it deleted. Their checkpoints stay until the next finished turn prunes them: a turn
    starts from the last finished one's, never from theirs."""

    def apply(conn: Connection) -> int:
        marks = ", ".join("?" * len(run_ids))
        gone = conn.execute(
            f"SELECT id, started FROM runs WHERE thread_id = ? AND id IN ({marks}) "
            "AND status = 'interrupted'",
            (thread_id, *run_ids),
        ).fetchall()
        if not gone:
            return 0
        ids = tuple(row[0] for row in gone)
        marks = ", ".join("?" * len(ids))
        for table, column in (("events", "run_id"), ("gates", "run_id"), ("messages", "run_id")):
            conn.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", ids)
        conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", ids)
        # a turn counts once admitted (it has a start); one cancelled while it waited never was
        admitted = sum(1 for row in gone if row[1] is not None)
        conn.execute(
            "UPDATE threads SET turns = CASE WHEN turns > ? THEN turns - ? ELSE 0 END, "
            "last_run = (SELECT id FROM runs "
            "WHERE thread_id = ? AND started IS NOT NULL ORDER BY started DESC, id DESC LIMIT 1) "
            "WHERE id = ?",
            (admitted, admitted, thread_id, thread_id),
        )
        return len(ids)

    return apply


# ---- creating and deleting a thread -----------------------------------------------------------


def create(
    thread_id: str, flow: str | None, now: str, metadata: JsonDict | None = None
) -> Callable[[Connection], Thread | None]:
    """A writer call: a thread with no turns yet (its flow '' when not given, named by its first
    turn, with the `metadata` a LangGraph API client gave it); None when the id is taken."""

    def apply(conn: Connection) -> Thread | None:
        cursor = conn.execute(
            "INSERT OR IGNORE INTO threads (id, flow, title, name, created, updated, turns, "
            "last_run, checkpoint, metadata) VALUES (?, ?, '', NULL, ?, ?, 0, NULL, NULL, ?)",
            (thread_id, flow or "", now, now, store.dumps(metadata) if metadata else None),
        )
        return get_thread(conn, thread_id) if cursor.rowcount == 1 else None

    return apply


def merge_metadata(thread_id: str, metadata: JsonDict) -> Callable[[Connection], bool]:
    """A writer call: add `metadata` to a thread's (its keys win); False when there is no such thread."""

    def apply(conn: Connection) -> bool:
        row = conn.execute("SELECT metadata FROM threads WHERE id = ?", (thread_id,)).fetchone()
        if row is None:
            return False
        merged = {**(json.loads(row[0]) if row[0] else {}), **metadata}
        conn.execute(
            "UPDATE threads SET metadata = ? WHERE id = ?", (store.dumps(merged), thread_id)
        )
        return True

    return apply


def metadata_of(conn: Connection, thread_ids: Sequence[str]) -> dict[str, JsonDict]:
    """The metadata of each thread that has some, by id."""
    found: dict[str, JsonDict] = {}
    for start in range(0, len(thread_ids), 500):  # SQLite's bound on parameters
        chunk = list(thread_ids[start : start + 500])
        marks = ", ".join("?" * len(chunk))
        for thread_id, text in conn.execute(
            f"SELECT id, metadata FROM threads WHERE id IN ({marks}) AND metadata IS NOT NULL",
            chunk,
        ):
            found[thread_id] = json.loads(text)
    return found


@dataclass(frozen=True)
class Busy:
    """Why a thread cannot be deleted now: a run of it is `status` (running or waiting)."""

    run_id: str
    status: str


def delete(thread_id: str, checkpoints: Sequence[Write]) -> Callable[[Connection], bool | Busy]:
    """A writer call: delete a thread — its row, its messages, its checkpoints (`checkpoints`: the
    saver's statements for that, `saver.delete_thread_writes`, whose tables differ by backend) — so
    that its id is free again; False when there is no such thread, Busy while a turn of it runs
    (with a live owner) or waits for approval. Its runs stay in `runs` (their traces are history),
    and cannot be resumed any more (`check_current`)."""

    def apply(conn: Connection) -> bool | Busy:
        if conn.execute("SELECT 1 FROM threads WHERE id = ?", (thread_id,)).fetchone() is None:
            return False
        held = busy_turn(conn, thread_id)
        if held is not None:
            return held
        for write in checkpoints:
            conn.execute(write.sql, write.params)
        for sql in ("DELETE FROM messages WHERE thread_id = ?", "DELETE FROM threads WHERE id = ?"):
            conn.execute(sql, (thread_id,))
        return True

    return apply


def busy_turn(conn: Connection, thread_id: str) -> Busy | None:
    """The turn of the thread that holds it now: one running (with a live owner) or waiting for approval."""
    for run_id, status, pid, host, start, replica, lease in conn.execute(
        "SELECT id, status, owner_pid, owner_host, owner_start, owner_replica, lease_until FROM runs "
        "WHERE thread_id = ? AND status IN ('running', 'waiting')",
        (thread_id,),
    ):
        if status == RunStatus.WAITING or liveness.is_alive(pid, host, start, replica, lease):
            return Busy(run_id, status)
    return None


# ---- reading ----------------------------------------------------------------------------------

_COLUMNS = "id, flow, title, created, updated, turns, last_run, name"


def list_threads(
    conn: Connection, *, flow: str | None = None, limit: int | None = 50
) -> list[Thread]:
    """Threads, most recently active first."""
    sql = (
        f"SELECT {_COLUMNS} FROM threads"
        + (" WHERE flow = ?" if flow else "")
        + " ORDER BY updated DESC, id"
    )
    params: list[Any] = [flow] if flow else []
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [Thread(*row) for row in conn.execute(sql, params)]


def get_thread(conn: Connection, thread_id: str) -> Thread | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return Thread(*row) if row is not None else None


def thread_ids(conn: Connection) -> list[str]:
    return [
        row[0] for row in conn.execute("SELECT id FROM threads ORDER BY updated DESC LIMIT 1000")
    ]
