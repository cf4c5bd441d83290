"""What happens when a run ends, besides its status: the memory history record and a thread's reply.

Both are built per execution by the engine (engine/runtime/engine.py) and called by the execution
(`Execution.on_end`, engine/runtime/execution.py) as the run finishes or fails. A thread's reply is
not committed here: the hook returns its statements (the reply checkpoint, the turn's `messages`
rows), which the execution commits in the transaction that records the run's end — so a next turn
never starts from a checkpoint without the previous reply, and the checkpoint and the messages
table never disagree.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.compile.compiled import REPLY_NODE
from engine.core.events import RunStatus, now_iso
from engine.core.values import JsonDict
from engine.runtime import turns
from engine.runtime.execution import EndHook
from engine.runtime.memory import history_record
from engine.state.checkpointer import StateDB
from engine.state.memory import RunMemory
from engine.state.store import RunRecord
from engine.state.writer import Write

log = logging.getLogger(__name__)


def end_hook(db: StateDB, graph: Any, run: RunRecord, memory: RunMemory | None) -> EndHook | None:
    """The on_end hook of one execution, or None when there is nothing to do."""
    if memory is None and run.thread_id is None:
        return None

    async def on_end(status: RunStatus, outputs: JsonDict | None, error: str | None) -> list[Write]:
        if memory is not None:
            try:
                await memory.remember_run(history_record(run, status, outputs, error))
            except Exception as exc:  # the run's result stands; memory is best kept, not required
                log.warning(
                    "run %s: could not store its history in memory scope %s: %s",
                    run.id,
                    memory.scope,
                    exc,
                )
        if run.thread_id is not None and status == RunStatus.FINISHED:
            return await turns.finish_turn(
                db, graph, run.thread_id, run.id, run.inputs, outputs, REPLY_NODE, now_iso()
            )
        return []

    return on_end
