"""What happens when a run ends, besides its status: the memory history record and a thread's reply.

Both are built per execution by the engine (engine/runtime/engine.py) and called by the execution
(`Execution.on_end`, engine/runtime/execution.py) as the run
finishes — before its status changes, so that the next turn of a thread never starts from a
checkpoint without the previous reply — or fails.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.compile.compiled import REPLY_NODE
from engine.events import RunStatus
from engine.runtime import turns
from engine.runtime.execution import EndHook
from engine.runtime.memory import history_record
from engine.state.checkpointer import StateDB
from engine.state.memory import RunMemory
from engine.state.store import RunRecord

log = logging.getLogger(__name__)


def end_hook(db: StateDB, graph: Any, run: RunRecord, memory: RunMemory | None) -> EndHook | None:
    """The on_end hook of one execution, or None when there is nothing to do."""
    if memory is None and run.thread_id is None:
        return None

    async def on_end(status: RunStatus, outputs: dict[str, Any] | None, error: str | None) -> None:
        if memory is not None:
            try:
                await memory.remember_run(history_record(run, status, outputs, error))
            except Exception as exc:  # the run's result stands; memory is best kept, not required
                log.warning("run %s: could not store its history in memory scope %s: %s", run.id, memory.scope, exc)
        if run.thread_id is not None and status == RunStatus.FINISHED:
            await turns.finish_turn(db, graph, run.thread_id, run.id, outputs, REPLY_NODE)

    return on_end
