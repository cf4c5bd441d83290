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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from engine.nodes.context import Restored
from engine.state import inline_steps
from engine.state.database import Connection
from engine.state.durable import GroupCommitted, running_task
from engine.state.fencing import Fence
from engine.state.writer import Write

Read = Callable[[Callable[[Connection], Any]], Awaitable[Any]]
NS_SEP = (
    "|"  # LangGraph's separator of nested checkpoint namespaces (a subflow's node inside a node)
)


def step_row(
    update: Mapping[str, Any], following: str, items: list[Any] | None
) -> tuple[str, dict[str, Any]]:
    """The `next` and the value of a step's row (see `Journal.finished`). A map's items share most of
    what they are sent (the inputs, the context, the results: the same objects in every argument), so
    the row keeps what every argument holds as the same object once (`shared`) and each item's own
    keys apart: a map over 1,000 items with a 50 KB context writes one copy of it, not 1,000."""
    if items is None:
        return following, dict(update)
    shared: dict[str, Any] = {}
    if items and all(isinstance(arg, dict) for arg in items):
        shared = {
            key: value
            for key, value in items[0].items()
            if all(arg.get(key, _NONE) is value for arg in items)
        }
    own = [{k: v for k, v in arg.items() if k not in shared} for arg in items] if shared else items
    return inline_steps.ITEMS + following, {"update": dict(update), "shared": shared, "items": own}


_NONE = object()  # no such key (a value may be None)


def item_next(position: int) -> str:
    """The `next` of the row of a map's item `position` (see `Journal.item_finished`)."""
    return inline_steps.ITEM + str(position)


def restored(rows: Iterable[tuple[int, str, Any]]) -> Restored | None:
    """What a node's rows, (seq, next, value) in order of seq, say it finished (see `Restored`); None
    when there are none. The `next` of a map fan-out's row and of its items' rows is marked
    (inline_steps.ITEMS, inline_steps.ITEM): the items' rows after the last fan-out's are its items
    that finished."""
    updates: list[Mapping[str, Any]] = []
    following, seq = "", -1
    items: list[Any] | None = None
    items_done: dict[int, Mapping[str, Any]] = {}
    for row_seq, row_next, value in rows:
        if row_next.startswith(inline_steps.ITEM):
            items_done[int(row_next.removeprefix(inline_steps.ITEM))] = value
            continue
        if row_next.startswith(inline_steps.ITEMS):  # a map's fan-out: its update, what it sent
            updates.append(value["update"])
            shared = value.get("shared") or {}
            sent = [{**shared, **arg} for arg in value["items"]] if shared else list(value["items"])
            following, items = row_next.removeprefix(inline_steps.ITEMS), sent
        else:
            updates.append(value)
            following, items = row_next, None
        items_done, seq = {}, row_seq + 1
    if seq < 0:
        return None
    return Restored(updates, following, seq, items, items_done if items is not None else {})


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
        self._rows: dict[str, list[tuple[int, str, str, bytes]]] | None = (
            None  # ns -> (seq, next, type, value), in order
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
            rows: dict[str, list[tuple[int, str, str, bytes]]] = {}
            for row_ns, seq, following, type_, value in found:  # ordered by namespace and seq
                rows.setdefault(str(row_ns), []).append(
                    (int(seq), str(following), str(type_), bytes(value))
                )
            self._rows = rows
        done = self._rows.pop(ns, None)
        if not done:
            return None
        serde = self.saver.serde
        return restored(
            (seq, following, serde.loads_typed((type_, value)))
            for seq, following, type_, value in done
        )

    async def finished(
        self,
        ns: str,
        seq: int,
        update: Mapping[str, Any],
        following: str,
        items: list[Any] | None = None,
    ) -> None:
        """Step number `seq` (0 for the node's own) of the node of task namespace `ns` finished with
        `update`; the node goes on to `following` — or, with `items`, it is a map's fan-out that
        sends one argument of `items` to item node `following` per item (`item_finished`)."""
        following, value = step_row(update, following, items)
        type_, blob = self.saver.serde.dumps_typed(value)
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

    def item_finished(self, ns: str, seq: int, position: int, update: Mapping[str, Any]) -> None:
        """Item `position` of a map whose items this node runs finished with `update`; `seq` is its
        row's number (the fan-out's, plus one, plus `position`). Called in the item's own task.

        Its row is queued, not awaited: committed with whatever is committed next (the next step's
        row, the node's checkpoint), as LangGraph queues the pending writes of a map's tasks. The
        trace rows the item wrote go in the same transaction (durable.py, `task_trace`), so the
        trace says an item finished exactly when a resume will not run it again."""
        type_, blob = self.saver.serde.dumps_typed(dict(update))
        row = Write(
            inline_steps.PUT,
            (self.thread, ns, seq, item_next(position), type_, self.saver.secrets.blob(blob)),
        )
        if self.mode == "exit":
            self._held.append(row)
            return
        traced = [] if NS_SEP in ns else self.saver.task_trace(self.thread, running_task())
        writes = [*traced, row]
        if self.fence is not None:
            writes = self.fence.guarded(writes)
        self.saver.writer.write_nowait(*writes, wake=False)

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
