"""Conversation threads: runs of one flow that share one LangGraph thread, one turn each.

`blockyard run FLOW --thread ID` starts a turn. Its first state carries only what is new — the
turn's inputs, a fresh context, and one human message made from the inputs — never the stored
history: `messages` has an append reducer, so re-sending history would duplicate it. When the
turn finishes, its reply (made from the outputs) is appended once, as if written by the graph's
reply node, and the checkpoints of earlier steps are pruned: continuing a thread needs only its
latest checkpoint, and without pruning every step re-stores the whole conversation (a 100-turn
thread would take megabytes; bench/bench_threads.py).

Turns of one thread never overlap: a turn is admitted in the transaction that inserts its run,
and only when no other run of the thread is running (with a live owner) or waiting for approval;
a turn that finds its thread busy waits for it, in this process or another.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import UsageError
from engine.runtime import owner, store
from engine.runtime.writer import Write

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

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "flow": self.flow, "title": self.title, "created": self.created,
                "updated": self.updated, "turns": self.turns, "last_run": self.last_run}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else store.dumps(value)


def turn_text(inputs: dict[str, Any]) -> str:
    """What a turn says: its `message` input, else its only text input, else `key: value` lines."""
    if isinstance(inputs.get("message"), str):
        return str(inputs["message"])
    texts = [value for value in inputs.values() if isinstance(value, str)]
    if len(inputs) == 1 or (len(texts) == 1 and len(inputs) == len(texts)):
        return _show(next(iter(inputs.values())))
    return "\n".join(f"{key}: {_show(value)}" for key, value in inputs.items())


def reply_text(outputs: dict[str, Any] | None) -> str:
    """A turn's reply: its only output, else `key: value` lines."""
    outputs = outputs or {}
    if len(outputs) == 1:
        return _show(next(iter(outputs.values())))
    return "\n".join(f"{key}: {_show(value)}" for key, value in outputs.items())


def title_of(text: str) -> str:
    """A thread's title: the first line of its first message, shortened."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "") or "(empty)"
    return line if len(line) <= TITLE_WIDTH else line[: TITLE_WIDTH - 1].rstrip() + "…"


def turn_state(inputs: dict[str, Any], run_id: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first state of a turn: only what is new (the stored messages stay where they are);
    `context` is what a run's context starts with (the empty keys steps accumulate)."""
    from langchain_core.messages import HumanMessage
    from langgraph.types import Overwrite

    return {"inputs": inputs, "context": Overwrite(dict(context or {})), "results": Overwrite([]),
            "loops": Overwrite({}),
            "messages": [HumanMessage(turn_text(inputs), id=f"{run_id}.in")]}


# ---- admitting a turn -------------------------------------------------------------------------

def check_thread_id(thread_id: str) -> str:
    """Thread ids follow the rules of run ids: letters, digits, `_`, `.`, `-`; at most 64."""
    from engine.runtime.ids import check_run_id

    try:
        return check_run_id(thread_id)
    except UsageError:
        raise UsageError(f"invalid thread id '{thread_id}': use up to 64 letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit") from None


def admit(thread_id: str, flow: str, title: str, writes: Sequence[Write], run_id: str, now: str
          ) -> Callable[[sqlite3.Connection], bool]:
    """A writer call: when the thread is free, insert the run (`writes`) and count the turn; False
    when another run of the thread is still running; UsageError when the thread cannot take it."""

    def apply(conn: sqlite3.Connection) -> bool:
        row = conn.execute("SELECT flow FROM threads WHERE id = ?", (thread_id,)).fetchone()
        if row is not None and row[0] != flow:
            raise UsageError(f"thread '{thread_id}' is a conversation with flow '{row[0]}', not '{flow}'")
        for other, status, pid, host, start in conn.execute(
                "SELECT id, status, owner_pid, owner_host, owner_start FROM runs WHERE thread_id = ? "
                "AND status IN ('running', 'waiting')", (thread_id,)):
            if status == "waiting":
                raise UsageError(f"thread '{thread_id}' waits for an approval in run {other}: decide it first "
                                 f"(`blockyard resume {other} --approve` or `--reject`)")
            if owner.is_alive(pid, host, start):
                return False
        for write in writes:
            if write.many:
                conn.executemany(write.sql, write.params)
            else:
                conn.execute(write.sql, write.params)
        conn.execute("INSERT INTO threads (id, flow, title, created, updated, turns, last_run) "
                     "VALUES (?, ?, ?, ?, ?, 1, ?) "
                     "ON CONFLICT(id) DO UPDATE SET updated = excluded.updated, turns = turns + 1, "
                     "last_run = excluded.last_run", (thread_id, flow, title, now, now, run_id))
        return True

    return apply


async def wait_turn(call: Callable[[], Any], thread_id: str, limit: float = 3600.0) -> None:
    """Call `call()` (an admitting write) until the thread takes the turn."""
    pause, waited = POLL[0], 0.0
    while not await call():
        if waited >= limit:
            raise UsageError(f"thread '{thread_id}' stayed busy for {limit:.0f} s; try again later")
        await asyncio.sleep(pause)
        waited += pause
        pause = min(pause * 2, POLL[1])


def check_current(conn: sqlite3.Connection, thread_id: str, run_id: str) -> None:
    """A run of a thread can be resumed only while it is the thread's latest turn."""
    row = conn.execute("SELECT last_run FROM threads WHERE id = ?", (thread_id,)).fetchone()
    if row is not None and row[0] not in (None, run_id):
        raise UsageError(f"run {run_id} cannot be resumed: its conversation thread '{thread_id}' has gone on "
                         f"with run {row[0]}")


# ---- finishing a turn -------------------------------------------------------------------------

async def finish_turn(db: Any, graph: Any, thread_id: str, run_id: str, outputs: dict[str, Any] | None,
                      reply_node: str) -> None:
    """Append the turn's reply to the thread's messages, then drop the checkpoints before it."""
    from langchain_core.messages import AIMessage

    config = {"configurable": {"thread_id": thread_id}}
    state = await graph.aget_state(config)
    # pruned before and after the reply's checkpoint: the file never holds more than one extra copy
    await db.writer.write(*prune(thread_id, state.config["configurable"]["checkpoint_id"]))
    saved = await graph.aupdate_state(config, {"messages": [AIMessage(reply_text(outputs), id=f"{run_id}.out")]},
                                      as_node=reply_node)
    await db.writer.write(*prune(thread_id, saved["configurable"]["checkpoint_id"]))


def prune(thread_id: str, keep: str) -> tuple[Write, Write]:
    """Delete every checkpoint (and pending write) of a thread but its latest root checkpoint."""
    where = "WHERE thread_id = ? AND NOT (checkpoint_ns = '' AND checkpoint_id = ?)"
    return (Write(f"DELETE FROM writes {where}", (thread_id, keep)),
            Write(f"DELETE FROM checkpoints {where}", (thread_id, keep)))


# ---- reading ----------------------------------------------------------------------------------

_COLUMNS = "id, flow, title, created, updated, turns, last_run"


def list_threads(conn: sqlite3.Connection, *, flow: str | None = None, limit: int | None = 50) -> list[Thread]:
    """Threads, most recently active first."""
    sql = f"SELECT {_COLUMNS} FROM threads" + (" WHERE flow = ?" if flow else "") + " ORDER BY updated DESC, id"
    params: list[Any] = [flow] if flow else []
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [Thread(*row) for row in conn.execute(sql, params)]


def get_thread(conn: sqlite3.Connection, thread_id: str) -> Thread | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return Thread(*row) if row is not None else None


def thread_ids(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT id FROM threads ORDER BY updated DESC LIMIT 1000")]
