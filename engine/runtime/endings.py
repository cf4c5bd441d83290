"""What happens when a run ends, besides its status: the memory history record and a thread's reply.

Both are built per execution by the Yard and called by the runner (`Execution.on_end`) as the run
finishes or fails. A thread's reply is not committed here: the hook returns its statements (the
reply checkpoint, the turn's `messages` rows), which the runner commits in the transaction that
records the run's end — so a next turn never starts from a checkpoint without the previous reply,
and the checkpoint and the messages table never disagree.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.compile.flow import REPLY_NODE
from engine.runtime import threads
from engine.runtime.events import now_iso
from engine.runtime.memory import RunMemory
from engine.runtime.runner import EndHook
from engine.runtime.savers import StateDB
from engine.runtime.store import RunRecord
from engine.runtime.writer import Write

log = logging.getLogger(__name__)


def history_record(run: RunRecord, status: str, outputs: dict[str, Any] | None, error: str | None
                   ) -> dict[str, Any]:
    """The memory history entry of a run: what went in, what came out, how it ended."""
    return {"run_id": run.id, "flow": run.flow, "version": run.version, "status": status, "inputs": run.inputs,
            "outputs": outputs, "error": error, "started": run.started, "ended": now_iso()}


def end_hook(db: StateDB, graph: Any, run: RunRecord, memory: RunMemory | None) -> EndHook | None:
    """The on_end hook of one execution, or None when there is nothing to do."""
    if memory is None and run.thread_id is None:
        return None

    async def on_end(status: str, outputs: dict[str, Any] | None, error: str | None) -> list[Write]:
        if memory is not None:
            try:
                await memory.remember_run(history_record(run, status, outputs, error))
            except Exception as exc:  # the run's result stands; memory is best kept, not required
                log.warning("run %s: could not store its history in memory scope %s: %s", run.id, memory.scope, exc)
        if run.thread_id is not None and status == "finished":
            return await threads.finish_turn(db, graph, run.thread_id, run.id, run.inputs, outputs, REPLY_NODE,
                                             now_iso())
        return []

    return on_end
