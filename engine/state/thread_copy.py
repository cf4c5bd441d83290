"""Copying a conversation thread (`POST /threads/{id}/copy` of the LangGraph API): a new thread with the same
conversation — every branch — that goes on apart from the original.

The copy gets a record of each turn (a row of `runs` under a new id, its flow, inputs, outputs, status and
spend as the original's; `after_turn` pointing at the copies) and the turns' `messages` rows under those
ids, so that its history, state and branches read as the original's. The traces stay with the original
runs. No checkpoint is copied: the copy's first turn starts from its branch's messages, as a turn that
branches does (engine/state/threads.py, `admit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from engine.state import store
from engine.state.database import Connection
from engine.state.ids import new_run_id
from engine.state.threads import Busy, Thread, busy_turn, get_thread


def copy(thread_id: str, new_id: str, now: str) -> Callable[[Connection], Thread | Busy | None]:
    """A writer call: copy thread `thread_id` to `new_id`; None when there is no such thread, Busy while a
    turn of it runs (with a live owner) or waits at a gate. `new_id` is a fresh id: a taken one fails the
    insert, as a run id taken twice does."""

    def apply(conn: Connection) -> Thread | Busy | None:
        row = conn.execute(
            "SELECT flow, title, name, turns, metadata, branched, inputs FROM threads WHERE id = ?",
            (thread_id,),
        ).fetchone()
        if row is None:
            return None
        turns = [
            run
            for run in store.list_runs(conn, thread=thread_id, limit=None)
            if run.started is not None
        ]
        held = busy_turn(conn, thread_id)
        if held is not None:
            return held
        # oldest first: the new ids (which sort by time) keep their order
        turns.sort(key=lambda run: (run.started or "", run.id))
        ids = {run.id: new_run_id() for run in turns}
        conn.execute(
            "INSERT INTO threads (id, flow, title, name, created, updated, turns, last_run, "
            "checkpoint, metadata, branched, inputs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
            (
                new_id,
                row[0],
                row[1],
                row[2],
                now,
                now,
                row[3],
                ids[turns[-1].id] if turns else None,
                row[4],
                row[5],
                row[
                    6
                ],  # its written inputs (engine/state/thread_inputs.py), their record with them
            ),
        )
        for run in turns:
            copied = dataclasses.replace(
                run,
                id=ids[run.id],
                thread_id=new_id,
                after_turn=ids.get(run.after_turn or ""),
                regenerates=ids.get(run.regenerates or ""),
                owner_pid=None,
                owner_host=None,
                owner_start=None,
                owner_replica=None,
                lease_until=None,
            )
            write = store.insert_run(copied)
            conn.execute(write.sql, write.params)
        for old, new in ids.items():
            conn.execute(
                "INSERT INTO messages (thread_id, idx, role, content, run_id, created) "
                "SELECT ?, idx, role, content, ?, created FROM messages WHERE run_id = ?",
                (new_id, new, old),
            )
        return get_thread(conn, new_id)

    return apply
