"""What a durable run's steps finished inside one LangGraph node: committed one by one, read back
when the node runs again (engine/state/inline_steps.py has the table; engine/compile/inline.py
the node that runs the steps).

The modes are LangGraph's (docs/runtime.md, "Durability"). In `sync`, a step's row is committed
before the next step begins, in one transaction with the trace rows held since its `step_finished`
(engine/state/durable.py, `hold_trace`): as with a checkpoint, the trace never says that a step
finished which a crash then runs again, and a crash loses no finished step. In `async`, a step's
row is committed while the next step runs (that one waits for it before its own): a crash may run
the last finished step again, as LangGraph's async durability may. In `exit`, the rows wait in
memory and are written only when the node stops on a failure or an interruption, as LangGraph
writes that mode's checkpoint when the run stops: a resume goes on after the last step that
finished, and a crash loses the run's progress.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from engine.nodes.context import Restored
from engine.state import inline_steps
from engine.state.database import Connection
from engine.state.durable import GroupCommitted
from engine.state.fencing import Fence
from engine.state.writer import Write

Read = Callable[[Callable[[Connection], Any]], Awaitable[Any]]
NS_SEP = (
    "|"  # LangGraph's separator of nested checkpoint namespaces (a subflow's node inside a node)
)


class Journal:
    """The inline steps of one execution of a run (checkpoint thread `thread`), written through
    `saver`'s writer, guarded by `fence` on a replica. `resumed`: the execution goes on with a run
    that ran before, whose rows `restore` reads (once, all of them); a new run has none."""

    def __init__(
        self,
        saver: GroupCommitted,
        read: Read,
        thread: str,
        fence: Fence | None,
        *,
        mode: str,
        resumed: bool,
    ) -> None:
        self.saver = saver
        self.read = read
        self.thread = thread
        self.fence = fence
        self.mode = mode
        self.resumed = resumed
        self._rows: dict[str, list[tuple[str, str, bytes]]] | None = (
            None  # ns -> (next, type, value), in order
        )
        self._pending: asyncio.Future[None] | None = None
        self._held: list[Write] = []  # `exit`: the rows of the node running now

    async def restore(self, ns: str) -> Restored | None:
        """The updates of the steps the node of task namespace `ns` finished when it ran before, in
        order, and the node it was going on to; None when it finished none."""
        if not self.resumed:
            return None
        if self._rows is None:
            thread = self.thread
            found = await self.read(
                lambda conn: conn.execute(inline_steps.READ, (thread,)).fetchall()
            )
            rows: dict[str, list[tuple[str, str, bytes]]] = {}
            for row_ns, _seq, following, type_, value in found:  # ordered by namespace and seq
                rows.setdefault(str(row_ns), []).append((str(following), str(type_), bytes(value)))
            self._rows = rows
        done = self._rows.pop(ns, None)
        if not done:
            return None
        updates = [self.saver.serde.loads_typed((type_, value)) for _next, type_, value in done]
        return Restored(updates, done[-1][0])

    async def finished(self, ns: str, seq: int, update: Mapping[str, Any], following: str) -> None:
        """Step number `seq` (0 for the node's own) of the node of task namespace `ns` finished with
        `update`; the node goes on to `following`."""
        type_, blob = self.saver.serde.dumps_typed(dict(update))
        row = Write(
            inline_steps.PUT,
            (self.thread, ns, seq, following, type_, self.saver.secrets.blob(blob)),
        )
        if self.mode == "exit":
            self._held.append(row)
            return
        # a subflow's steps: its trace rows wait for the parent's step, as its checkpoints' do
        writes = [row] if NS_SEP in ns else [*self.saver.take_trace(self.thread), row]
        if self.fence is not None:
            writes = self.fence.guarded(writes)
        if self.mode == "sync":
            await self.saver.writer.write(*writes)
            return
        await self.settle()
        self._pending = asyncio.ensure_future(self.saver.writer.write(*writes))
        self._pending.add_done_callback(_retrieved)  # a step that failed meanwhile never awaits it

    async def settle(self) -> None:
        """The node ends (LangGraph's checkpoint holds its steps now): wait for the row still being
        committed (`async`); forget the rows held (`exit`)."""
        self._held.clear()
        pending, self._pending = self._pending, None
        if pending is not None:
            await pending

    def stopped(self) -> None:
        """The node stops on a failure or an interruption: the rows held (`exit`) are queued, ahead of
        whatever the run writes as it stops (without waiting: a cancelled task must not)."""
        held, self._held = self._held, []
        if held:
            self.saver.writer.write_nowait(
                *(self.fence.guarded(held) if self.fence is not None else held)
            )


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
