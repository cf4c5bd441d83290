"""What a durable checkpointer does on the group-commit writer (engine/state/writer.py), whatever
the backend: its writes go through the writer (or are held back for the transaction that ends a
conversation turn), its async reads run on a private reader thread. The SQLite saver
(engine/state/checkpointer.py, `DurableSaver`) and the Postgres one (engine/state/pgsaver.py,
`PgDurableSaver`) build their own statements and answer the sync reads."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from engine.core.redaction import Masker
from engine.nodes.context import INLINE_ITEM
from engine.state import fencing
from engine.state.writer import SqliteWriter, Write

T = TypeVar("T")

# While set (see `DurableSaver.held`), checkpoint writes of this task are collected here instead of
# committed: the caller commits them together with other rows, in one transaction.
_HELD: contextvars.ContextVar[list[Write] | None] = contextvars.ContextVar(
    "blockyard_held_writes", default=None
)


def running_task() -> str | None:
    """The id of the root graph's LangGraph task whose node (or a subgraph inside it) is running here,
    from the config LangGraph sets for the node; None outside a node. A task's checkpoint namespace is
    `node:task_id`, a subgraph's inside it `node:task_id|inner:inner_id`: the root task is the first.
    Inside a map item that the node runs itself (INLINE_ITEM), the task's id and `/position`: the
    item's trace rows are committed with the item's own row (journal.py, `item_finished`)."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    namespace = str((config.get("configurable") or {}).get("checkpoint_ns") or "")
    task = namespace.split("|", 1)[0].rpartition(":")[2] or None
    item = INLINE_ITEM.get()
    return task if item is None or task is None else f"{task}/{item}"


class GroupCommitted(BaseCheckpointSaver[str], metaclass=abc.ABCMeta):
    """What a checkpointer on the group-commit writer does whatever the backend: writes through
    `writer` (held back inside `held`), async reads on a private reader thread, and the two
    shortcuts of a run's start (`expect_new`, `aread_for_start`). A subclass builds the backend's
    statements (`_checkpoint_writes`, `_writes_write`, `delete_thread_writes`, `prune_writes`)
    and answers the sync reads (`get_tuple`, `list`, `get_delta_channel_history`)."""

    writer: SqliteWriter
    secrets: Masker
    lock: threading.Lock  # the backend saver's: reads on the reader connection take it

    def _start_group_commit(self, writer: SqliteWriter, secrets: Masker | None) -> None:
        # the last line of defence for API keys (engine/core/redaction.py): whatever state still holds
        # one is masked in the serialized bytes, lengths kept
        self.secrets = secrets if secrets is not None else Masker()
        self.writer = writer
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="blockyard-reader")
        self._fresh: set[str] = set()  # threads known to have no checkpoint yet
        self._handoff: dict[tuple[str, str], CheckpointTuple] = {}  # see `aread_for_start`
        self._trace: dict[str, list[tuple[str | None, Write]]] = {}  # see `hold_trace`: (task, row)
        self._trace_lock = threading.Lock()

    def hold_trace(self, thread_id: str, write: Write, *, begin: bool) -> bool:
        """Hold a trace row of `thread_id` for the transaction of its next checkpoint (or the run's
        end, `take_trace`); `begin` starts holding, else the row is held only while others are.
        A `step_finished` row begins it: committed before the checkpoint that holds the step's
        result, it would say a step finished that a crash then runs again; the rows after it are
        held too, so that the trace is stored in order. Returns whether the row was held.

        A row written by a node is held with the LangGraph task that runs the node (`running_task`):
        the task's pending writes carry the rows up to its last one (`_task_trace`), so that a map
        item's `step_finished` is committed with the item's result even while other items run on."""
        with self._trace_lock:
            rows = self._trace.get(thread_id)
            if rows is None:
                if not begin:
                    return False
                rows = self._trace[thread_id] = []
            rows.append((running_task(), write))
            return True

    def take_trace(self, thread_id: str) -> list[Write]:
        """The trace rows held for `thread_id` (see `hold_trace`), to commit with what comes next."""
        with self._trace_lock:
            return [row for _task, row in self._trace.pop(thread_id, [])]

    def _task_trace(self, config: RunnableConfig, task_id: str) -> list[Write]:
        """The trace rows to commit with the pending writes of root task `task_id`: the rows held up to
        the last one its node wrote (those before it too: the trace is stored in order), or none.

        Why: the items of a map (a superstep of many tasks, LangGraph's Send fan-out) finish one by
        one, and LangGraph keeps each one's result as pending writes, which a resume applies instead
        of running the item again; the superstep's checkpoint comes only after the last item. Held
        for that checkpoint, the `step_finished` rows of the items finished before a crash were lost
        with the process while their results were committed: the resume ran them no more, and the
        trace never said they finished. Committed in the same transaction as the result, an item's
        `step_finished` is in the trace exactly when the resume will not run the item again. The
        rows after it stay held (for the next task's pending writes, the checkpoint or the run's end).
        A `step_finished` of another task among the rows before it finished earlier, and LangGraph
        submits pending writes in the order tasks finish, so that task's went first; the one exception
        is a step nested in a still-running item (a map body, a subflow), whose row may come a moment
        before its own subgraph checkpoint is committed."""
        conf = config["configurable"]
        if conf.get("checkpoint_ns"):  # a subgraph's task: its rows wait for the parent's task
            return []
        return self.task_trace(str(conf["thread_id"]), task_id)

    def task_trace(self, thread_id: str, task_id: str | None) -> list[Write]:
        """The trace rows held for `thread_id` up to the last one task `task_id` wrote (`running_task`),
        or none (see `_task_trace`)."""
        if task_id is None:
            return []
        with self._trace_lock:
            rows = self._trace.get(thread_id)
            if not rows:
                return []
            last = next((at for at in range(len(rows) - 1, -1, -1) if rows[at][0] == task_id), None)
            if last is None:
                return []
            taken, rows[: last + 1] = rows[: last + 1], []
        # still holding (an empty list): rows written after these wait as before
        return [row for _task, row in taken]

    def _with_trace(self, config: RunnableConfig, writes: list[Write]) -> list[Write]:
        conf = config["configurable"]
        if conf.get("checkpoint_ns"):  # a subgraph's checkpoint: the parent's step goes on
            return writes
        return [*self.take_trace(str(conf["thread_id"])), *writes]

    def expect_new(self, thread_id: str) -> None:
        """Declare that `thread_id` has no checkpoint (a run that was just created): its first
        read is answered without a query — 500 runs starting at once would otherwise queue
        500 reads on the reader thread before any of them can take a step."""
        self._fresh.add(thread_id)

    def close(self) -> None:
        self._reader.shutdown(wait=True)

    @staticmethod
    @contextlib.contextmanager
    def held() -> Iterator[list[Write]]:
        """Collect the checkpoint writes made inside the block (in this task) instead of committing
        them: a conversation turn's reply checkpoint is committed in the transaction that ends the
        run, with its rows in `messages` (engine/runtime/turns.py)."""
        writes: list[Write] = []
        token = _HELD.set(writes)
        try:
            yield writes
        finally:
            _HELD.reset(token)

    async def _read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader, lambda: fn(*args, **kwargs))

    # ---- what a backend builds (DurableSaver for SQLite, PgDurableSaver for Postgres) ---------

    @abc.abstractmethod
    def _checkpoint_writes(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[list[Write], RunnableConfig]:
        """The statements that store a checkpoint, and the config that names it."""

    @abc.abstractmethod
    def _writes_write(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Write:
        """The statement that stores a task's pending writes."""

    @abc.abstractmethod
    def delete_thread_writes(self, thread_id: str) -> list[Write]:
        """Statements deleting every checkpoint of a thread (its tables differ by backend)."""

    @abc.abstractmethod
    def prune_writes(self, thread_id: str, keep: str) -> list[Write]:
        """Statements deleting every checkpoint (and pending write) of a thread but its root
        checkpoint `keep`: a finished turn's thread needs only that one (engine/state/threads.py)."""

    @abc.abstractmethod
    def prune_finished(self, thread_id: str) -> list[Write]:
        """Statements deleting every checkpoint of a finished run's thread but its last root one
        (with its pending writes): what `runs show` and the LangGraph state of a finished run read.
        The latest is chosen when the statements run, in the transaction that records the run's end."""

    @abc.abstractmethod
    def prune_stopped(self, thread_id: str) -> list[Write]:
        """Statements deleting the root checkpoints of a stopped run's thread (failed, interrupted,
        waiting at a gate) older than its last one, with their pending writes: a resume goes on from
        the last root checkpoint and its pending writes, and a subflow from its own namespace, kept."""

    # ---- writes -----------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._fresh.discard(str(config["configurable"]["thread_id"]))
        writes, saved = self._checkpoint_writes(config, checkpoint, metadata, new_versions)
        self.writer.write_sync(*fencing.guarded(self._with_trace(config, writes)))
        return saved

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._fresh.discard(str(config["configurable"]["thread_id"]))
        writes, saved = self._checkpoint_writes(config, checkpoint, metadata, new_versions)
        writes = self._with_trace(config, writes)
        held = _HELD.get()
        if held is not None:  # guarded where they are committed (the run's end)
            held.extend(writes)
        elif metadata.get("source") == "input":
            # The checkpoint of a run's input: LangGraph's next step is to apply it and checkpoint
            # again, with no node run in between, and that checkpoint is committed with this one in
            # one transaction (a quiet write keeps its place in the queue). A crash in between loses
            # nothing a node did: the run has no checkpoint yet, as just after it was created.
            self.writer.write_nowait(*fencing.guarded(writes), wake=False)
        else:  # on a replica: only while it still owns the run (engine/state/fencing.py)
            await self.writer.write(*fencing.guarded(writes))
        return saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        rows = [
            *self._task_trace(config, task_id),
            self._writes_write(config, writes, task_id, task_path),
        ]
        self.writer.write_sync(*fencing.guarded(rows))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        # LangGraph never waits for these (it submits them in the background and waits for the
        # checkpoint instead), so neither do we: queued now, in order, committed with the next
        # checkpoint (or whatever write comes first), which is awaited. They do not wake the writer:
        # that would be a transaction of their own, and a GIL hand-over, per step. The trace rows of
        # the task (its `step_finished`) go in the same item, hence the same transaction (`_task_trace`).
        rows = [
            *self._task_trace(config, task_id),
            self._writes_write(config, writes, task_id, task_path),
        ]
        held = _HELD.get()
        if held is not None:
            held.extend(rows)
        else:
            self.writer.write_nowait(*fencing.guarded(rows), wake=False)

    def delete_thread(self, thread_id: str) -> None:
        self.writer.write_sync(*self.delete_thread_writes(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await self.writer.write(*self.delete_thread_writes(thread_id))

    # ---- reads ------------------------------------------------------------------------------
    async def aread_for_start(self, thread_id: str, checkpoint_id: str) -> CheckpointTuple | None:
        """Read the checkpoint a conversation turn is about to start from, and hand it to the graph's
        own read of the same checkpoint, once: deserializing a long conversation is the dearest part
        of a turn's start (checkpoints never change once written, and only this one read reuses it)."""
        found = await self._read(
            self.get_tuple,
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": "",
                    "checkpoint_id": checkpoint_id,
                }
            },
        )
        if found is not None:
            if len(self._handoff) > 64:  # turns that never started (an error in between)
                self._handoff.clear()
            self._handoff[(thread_id, checkpoint_id)] = found
        return found

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        if conf.get("checkpoint_id") and not conf.get("checkpoint_ns"):
            handed = self._handoff.pop(
                (str(conf.get("thread_id")), str(conf["checkpoint_id"])), None
            )
            if handed is not None:
                return handed
        if (
            str(conf.get("thread_id")) in self._fresh
            and not conf.get("checkpoint_ns")
            and not conf.get("checkpoint_id")
        ):
            return None
        return await self._read(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await self._read(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._read(self.get_delta_channel_history, config=config, channels=channels)
