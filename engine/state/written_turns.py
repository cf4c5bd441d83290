"""Turns of a conversation thread written by a client instead of said by its flow: `POST /threads/{id}/state`
of the LangGraph API (docs/langgraph-api.md, "Writing a thread's state").

A thread changes only by its turns, so a write is recorded as turns: one finished run per message and reply
written, going on from the turn the write starts at (a new branch when that is not the thread's latest,
engine/state/branches.py), each with a trace of its own that says who wrote it (`turn_written`, then
`run_finished`). Nothing is changed in place: the turns it replaces stay in the thread's history. The
thread's checkpoint is forgotten, so its next turn starts from its branch's messages, as a copied thread's
does (engine/state/threads.py, `admit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from engine.core.events import RUN_FINISHED, TURN_WRITTEN, Event, RunStatus
from engine.state import branches, messages, store
from engine.state.database import Connection
from engine.state.ids import new_run_id
from engine.state.store import RunRecord
from engine.state.threads import Busy, busy_turn, title_of
from engine.state.writer import Write


@dataclass(frozen=True)
class Said:
    """One turn written: what the person said and what the reply was."""

    message: str
    reply: str


def write(
    thread_id: str,
    after: str | None,
    said: Sequence[Said],
    template: RunRecord,
    definition: Write,
    *,
    by: str,
    as_node: str | None,
    message_key: str,
    reply_key: str,
) -> Callable[[Connection], list[str] | Busy | None]:
    """A writer call: the turns `said`, after finished turn `after` (None: from the thread's start), recorded
    as runs like `template` (its flow, version and digest, stored by `definition`); their ids. None when
    the thread is gone, Busy while a turn of it runs or waits at a gate."""

    def apply(conn: Connection) -> list[str] | Busy | None:
        if conn.execute("SELECT 1 FROM threads WHERE id = ?", (thread_id,)).fetchone() is None:
            return None
        held = busy_turn(conn, thread_id)
        if held is not None:
            return held
        if after != branches.head(conn, thread_id):
            branches.mark_branched(conn, thread_id)
        conn.execute(definition.sql, definition.params)
        written: list[str] = []
        previous = after
        for turn in said:
            run_id = new_run_id()
            now = template.created
            record = replace(
                template,
                id=run_id,
                thread_id=thread_id,
                inputs={message_key: turn.message},
                outputs={reply_key: turn.reply},
                after_turn=previous,
            )
            events = [
                Event(
                    TURN_WRITTEN,
                    run_id,
                    1,
                    None,
                    now,
                    {"by": by, "as_node": as_node, "message": turn.message, "reply": turn.reply},
                ),
                Event(
                    RUN_FINISHED,
                    run_id,
                    2,
                    None,
                    now,
                    {"status": RunStatus.FINISHED, "outputs": record.outputs, "duration_ms": 0},
                ),
            ]
            for step in (
                store.insert_run(record),
                store.insert_events(events),
                messages.append_turn(thread_id, run_id, turn.message, turn.reply, now),
            ):
                if step.many:
                    conn.executemany(step.sql, step.params)
                else:
                    conn.execute(step.sql, step.params)
            written.append(run_id)
            previous = run_id
        if written:
            # a thread made ahead of its turns is titled by the first message written to it
            conn.execute(
                "UPDATE threads SET title = CASE WHEN turns = 0 AND title = '' THEN ? ELSE title END, "
                "turns = turns + ?, last_run = ?, updated = ?, checkpoint = NULL WHERE id = ?",
                (title_of(said[0].message), len(written), written[-1], template.created, thread_id),
            )
        return written

    return apply
