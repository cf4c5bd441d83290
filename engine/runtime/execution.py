"""One execution of a run (its start, or a resume): stream the compiled graph, turn what its
nodes report into Events, record them, and record how the execution ended.

Every execution ends with exactly one terminal event: run_finished, approval_required (the run
waits for a person) or run_failed (failed or interrupted; `data.status` tells which).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from langgraph.types import Durability

from engine.compile import CompiledFlow
from engine.core.events import (
    APPROVAL_REQUIRED,
    MODEL_CALL,
    NOT_STORED,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    STEP_FAILED,
    STEP_FINISHED,
    STEP_STARTED,
    TERMINAL_TYPES,
    THREAD_NAME,
    Event,
    RunStatus,
    Sequencer,
    now_iso,
)
from engine.core.values import JsonDict
from engine.models import calls
from engine.nodes.context import RunContext
from engine.runtime import cancelling
from engine.runtime.direct_runs import plan_for
from engine.runtime.failures import Failure, describe
from engine.runtime.listen import Listener
from engine.runtime.naming import NAME_WAIT, Naming
from engine.runtime.observe import Observer, teller
from engine.spec.durability import NO_CHECKPOINTS
from engine.state import fencing, store
from engine.state import gates as gate_rows
from engine.state.checkpointer import StateDB
from engine.state.database import DB_ERRORS, StateError
from engine.state.journal import Journal
from engine.state.store import RunRecord
from engine.state.synchronous import level as commit_level
from engine.state.writer import GuardFailed, Write

log = logging.getLogger(__name__)

# (status, outputs, error) -> statements to commit with the run's end (a thread's reply), if any
EndHook = Callable[
    [RunStatus, "JsonDict | None", "str | None"], Awaitable["Sequence[Write] | None"]
]
# what the graph is streamed with, per durability mode; none compiles the graph without a checkpointer,
# and LangGraph then wants no mode (it warns that one has no effect, and "sync" would wait for a
# checkpoint it never makes)
GRAPH_DURABILITY: dict[str, Durability | None] = {
    "sync": "sync",
    "async": "async",
    "exit": "exit",
    "none": None,
}
EXIT_CODES = {
    RunStatus.FINISHED: 0,
    RunStatus.FAILED: 1,
    RunStatus.WAITING: 3,
    RunStatus.INTERRUPTED: 130,
}


@dataclass(frozen=True)
class RunResult:
    """How a run (or its latest resume) ended."""

    run_id: str
    status: RunStatus  # finished | failed | waiting | interrupted
    outputs: JsonDict | None
    error: str | None
    flow: str
    version: int
    step: str | None = None  # the failing step, or the gate a waiting run stopped at
    # approval_required data, one per gate
    waiting: list[JsonDict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.FINISHED

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)

    @classmethod
    def from_events(cls, run: RunRecord, events: list[Event]) -> RunResult:
        """The result told by the events of one execution (the last must be terminal)."""
        last = events[-1]
        if last.type == RUN_FINISHED:
            return cls(
                run.id, RunStatus.FINISHED, last.data.get("outputs"), None, run.flow, run.version
            )
        if last.type == APPROVAL_REQUIRED:
            gates = [e.data for e in events if e.type == APPROVAL_REQUIRED]
            return cls(
                run.id, RunStatus.WAITING, None, None, run.flow, run.version, last.step, gates
            )
        return cls(
            run.id,
            RunStatus(last.data.get("status", RunStatus.FAILED)),
            None,
            last.data.get("error"),
            run.flow,
            run.version,
            last.step,
        )


@dataclass
class Execution:
    """What one execution of a run needs; `start` is the graph input, None to go on from the checkpoint."""

    db: StateDB
    compiled: CompiledFlow
    run: RunRecord
    context: RunContext
    start: Any
    last_seq: int = 0
    started_data: JsonDict = field(default_factory=dict)
    values: JsonDict | None = None  # the checkpoint's state, when resuming
    # stored already (an approval decision): yielded first
    preface: list[Event] = field(default_factory=list)
    pending: JsonDict | None = (
        None  # gates to wait at again without running the graph (interrupt id -> request)
    )
    on_end: EndHook | None = None  # called as the run finishes (before its status changes) or fails
    checkpoint: str | None = (
        None  # where the graph starts (a thread's last finished turn); None: the latest
    )
    naming: Naming | None = (
        None  # a thread's first turn: its name, announced in a thread_name event
    )
    trace: bool = True  # False: no trace rows (a run with durability none that asked for none)
    # told every event of the execution as it is yielded (tokens included): OpenTelemetry export, metrics
    # (engine/runtime/observe.py); an observer's failure never touches the run
    observers: Sequence[Observer] = ()
    traceparent: str | None = None  # a W3C traceparent the run's trace continues (an HTTP caller's)
    # the disk guarantee of the run's commits (engine/state/synchronous.py; None: the yard's database's)
    synchronous: str | None = None


class _Steps:
    """Which steps are running, to time them and to name the step a failure happened in.

    Keyed by step and `data.index` (map items and foreach iterations of one step overlap).
    """

    def __init__(self) -> None:
        self.running: dict[tuple[str, Any], float] = {}
        self.last: str | None = None

    def see(self, event: Event) -> None:
        if event.step is None:
            return
        key = (event.step, event.data.get("index"))
        if event.type == STEP_STARTED:
            self.running[key] = time.monotonic()
            self.last = event.step
        elif event.type in (STEP_FINISHED, STEP_FAILED):
            began = self.running.pop(key, None)
            if began is not None:
                event.data.setdefault("duration_ms", round((time.monotonic() - began) * 1000, 1))

    def current(self) -> str | None:
        """The step that started last among those still running, else the last one started."""
        return self.running_now() or self.last

    def running_now(self) -> str | None:
        if self.running:
            return max(self.running, key=lambda key: self.running[key])[0]
        return None


async def execute(ex: Execution, *, ends_only: bool = False) -> AsyncGenerator[Event, None]:  # noqa: C901 - the loop every event of a run passes stays one generator: docs/performance.md
    """Run the graph and yield its events; the run's row and trace are updated as it goes, and the
    execution's observers are handed each event before it is yielded (told in batches, all of them by
    the execution's end: engine/runtime/observe.py). `ends_only`: the caller wants only how the
    execution ended (the events after the graph's); the step events are recorded all the same."""
    # the loop that translates the graph's stream stays here, in one generator: every event of the run
    # passes it, and a generator more would cost each of them; the parts before and after are _Pass's
    p = _Pass(ex)
    tell = teller(ex.observers, ex.run, ex)
    for event in ex.preface:
        if tell is not None:
            tell(event)
        yield event
    p.record(p.started)
    if tell is not None:
        tell(p.started)
    yield p.started
    naming = p.naming
    if naming is not None and p.name_known():
        event = await p.announce(0.0)
        if tell is not None:
            tell(event)
        yield event
    # nobody to hand the step events to: they stay where the nodes write them (recorded, not queued)
    stream = p.stream(quiet=ends_only and tell is None and naming is None)
    # a lone run commits its checkpoints, and its end, itself (engine/state/writer.py)
    running = ex.db.writer.running()
    running.__enter__()
    try:
        try:
            async for kind, data in stream:
                if kind == "event":
                    if tell is not None:
                        tell(data)
                    yield data
                    if naming is not None and naming.ready():
                        event = await p.announce(0.0)
                        if tell is not None:
                            tell(event)
                        yield event
                elif "__interrupt__" in data:
                    for item in data["__interrupt__"]:
                        p.interrupts[item.id] = item.value
                else:
                    p.values = data
        except (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt) as exc:
            # Ctrl-C, a cancelled task, or a consumer that stopped listening: resumable later
            event = await p.interrupted()
            if tell is not None:
                tell(event)
            if not isinstance(exc, GeneratorExit):  # nobody listens after GeneratorExit
                yield event
            raise
        except Exception as exc:
            p.failed(exc)
        finally:
            await stream.aclose()  # not left to the garbage collector when we stop early
        outcome = await p.outcome()
    finally:
        running.__exit__(None, None, None)
    for event in outcome:
        if tell is not None:
            tell(event)
        yield event


class _Pass:
    """The state of one execution and its parts: the start (the run_started event, the recorder, the
    journal, the stream of the graph), an interruption, and the outcome (finished, failed or waiting,
    each recorded with the run's new status in one transaction)."""

    def __init__(self, ex: Execution) -> None:
        self.ex = ex
        run = self.run = ex.run
        self.db = ex.db
        self.secrets = ex.context.secrets
        self.seq = Sequencer(run.id, ex.last_seq, secrets=self.secrets)
        self.steps = _Steps()
        self.began = time.monotonic()
        self.thread = run.thread_id or run.id
        self.started = self.seq.make(
            RUN_STARTED,
            data={
                "flow": run.flow,
                "version": run.version,
                "digest": run.digest,
                "inputs": run.inputs,
                **ex.started_data,
            },
        )
        # on a replica, every write of this execution holds only while the replica owns the run
        self.fence = fencing.for_run(run.id)
        # no checkpoints (durability none): trace rows wait for nothing; without a trace there are none
        self.record = _Trace(
            self.db, self.thread, self.fence, keep=ex.trace, hold=run.mode not in NO_CHECKPOINTS
        )
        # the run's totals, as the model calls of its steps add to them (engine/nodes/spend.py)
        self.spent = ex.context.spend.spent if ex.context.spend is not None else None
        self.naming = ex.naming
        self.values = ex.values  # a resumed run whose graph had already ended streams no values
        self.interrupts: JsonDict = dict(ex.pending or {})
        self.failure: Failure | None = None
        self.listener: Listener | None = (
            None  # none when the execution only waits at its gates again
        )

    def name_known(self) -> bool:
        """Start naming a thread's first turn; whether its name is known already (no naming model)."""
        naming = self.naming
        assert naming is not None
        naming.calls.spent = self.spent
        # the naming model's calls: model_call events of the run
        with calls.recording(naming.calls):
            naming.start()
        return naming.task is None

    async def announce(self, wait: float) -> Event:
        assert self.naming is not None
        with commit_level(self.ex.synchronous):
            return await _announce(self.db, self.seq, self.naming, wait, self.record)

    def stream(self, *, quiet: bool = False) -> AsyncGenerator[tuple[str, Any], None]:
        """The graph's stream: ("event", Event) as nodes report (recorded, and with `quiet` not
        streamed), else LangGraph's values and interrupts."""
        ex, run, steps, seq, record = self.ex, self.run, self.steps, self.seq, self.record
        if ex.pending is not None:
            return _none()

        def accept(data: Any) -> Event | None:
            # as the node writes it: its trace row is recorded (held) before the node goes on
            custom = seq.from_custom(data)
            if custom is not None:
                steps.see(custom)
                record(custom)
            return custom

        listener = self.listener = Listener(accept, quiet=quiet)
        if run.mode not in NO_CHECKPOINTS:
            # what steps run inside one node finish is kept (engine/state/journal.py)
            ex.context.journal = Journal(
                self.db.saver,
                self.db.aread,
                self.thread,
                self.fence,
                mode=run.mode,
                resumed=bool(ex.started_data.get("resumed")),
            )
        config: dict[str, Any] = {
            "configurable": {"thread_id": self.thread},
            "recursion_limit": ex.compiled.recursion_limit,
        }
        if ex.checkpoint is not None:
            # a thread's turn goes on from its last finished turn, not a failed one
            config["configurable"]["checkpoint_id"] = ex.checkpoint
        return listener.listen(
            ex.compiled.graph,
            ex.start,
            config,
            ex.context,
            ex.context.limits,
            self.fence,
            durability=GRAPH_DURABILITY[run.mode],
            synchronous=ex.synchronous,
            # from a run's start (or its inputs again), where LangGraph's loop adds nothing
            plan=plan_for(ex.compiled, run.mode, run.thread_id)
            if isinstance(ex.start, dict) and ex.checkpoint is None
            else None,
        )

    async def interrupted(self) -> Event:
        """The run_failed (interrupted) event of an execution stopped from outside, recorded; its error the
        reason its canceller gave (engine/runtime/cancelling.py), if it gave one."""
        why = cancelling.take(self.run.id)
        if self.listener is not None:
            await self.listener.stop()
        if self.naming is not None:
            self.naming.cancel()
        step = self.steps.current()
        event = self.seq.make(
            RUN_FAILED,
            step,
            {
                "status": RunStatus.INTERRUPTED,
                "error": why or "interrupted before it finished",
                "step": step,
            },
        )
        # taken over meanwhile: nothing of ours to record
        with contextlib.suppress(fencing.LeaseLost):
            await self.end(
                event,
                RunStatus.INTERRUPTED,
                error=event.data["error"],
                step=step,
                finished=now_iso(),
            )
        return event

    def failed(self, exc: Exception) -> None:
        if not fencing.refused(exc, self.fence):
            self.failure = describe(
                exc, self.steps.current(), self.steps.running_now(), self.ex.compiled
            )

    async def outcome(self) -> list[Event]:
        """How the execution ended, recorded: the events left to yield."""
        if self.fence is not None and self.fence.lost:
            self.record.take()  # another replica's rows now
            return [_lost(self.db, self.seq, self.thread, self.steps.current(), self.naming)]
        naming = self.naming
        preface = (
            [await self.announce(NAME_WAIT)] if naming is not None and not naming.announced else []
        )
        outputs: JsonDict | None = None
        ending: Sequence[Write] = ()
        if self.failure is None and not self.interrupts:
            outputs, ending = await self.outputs()
        try:
            if self.failure is not None:
                return [*preface, *await self.fail(self.failure)]
            if self.interrupts:
                return [*preface, *await self.wait()]
            return [*preface, await self.finish(outputs, ending)]
        except fencing.LeaseLost:
            step = self.failure.step if self.failure is not None else None
            self.record.take()
            return [*preface, _lost(self.db, self.seq, self.thread, step, None)]

    async def outputs(self) -> tuple[JsonDict | None, Sequence[Write]]:
        """The run's outputs and what its end hook commits with them (e.g. a thread's reply, with the
        run's new status, before a next turn may start); a failure of either is the run's."""
        ex = self.ex
        try:
            outputs = self.secrets.value(ex.compiled.outputs(self.values or {}))
        except Exception as exc:
            self.failure = describe(exc, None, None, ex.compiled)
            return None, ()
        if ex.on_end is None:
            return outputs, ()
        try:
            return outputs, await ex.on_end(RunStatus.FINISHED, outputs, None) or ()
        except Exception as exc:
            self.failure = describe(exc, None, None, ex.compiled)
            return None, ()

    async def fail(self, failure: Failure) -> list[Event]:
        # a server may echo the key
        failure = dataclasses.replace(failure, message=self.secrets.text(failure.message))
        self.failure = failure
        if self.ex.on_end is not None:
            await self.ex.on_end(RunStatus.FAILED, None, failure.message)
        data = {
            "status": RunStatus.FAILED,
            "error": failure.message,
            "step": failure.step,
            **failure.extra,
        }
        event = self.seq.make(RUN_FAILED, failure.step, data)
        await self.end(
            event, RunStatus.FAILED, error=failure.message, step=failure.step, finished=now_iso()
        )
        return [event]

    async def wait(self) -> list[Event]:
        interrupts = self.secrets.value(self.interrupts)
        gates = [
            self.seq.make(APPROVAL_REQUIRED, _gate_of(value), {"interrupt_id": iid, "value": value})
            for iid, value in interrupts.items()
        ]
        for gate in gates[:-1]:
            self.record(gate)
        await self.end(
            gates[-1],
            RunStatus.WAITING,
            gate_rows.record_waiting(self.run.id, interrupts, gates[-1].time),
        )
        return gates

    async def finish(self, outputs: JsonDict | None, ending: Sequence[Write]) -> Event:
        elapsed = time.monotonic() - self.began
        event = self.seq.make(
            RUN_FINISHED,
            None,
            {
                "status": RunStatus.FINISHED,
                "outputs": outputs,
                "duration_ms": round((self.run.duration + elapsed) * 1000, 1),
            },
        )
        await self.end(
            event,
            RunStatus.FINISHED,
            *ending,
            outputs=outputs,
            finished=event.time,
            elapsed=elapsed,
        )
        return event

    async def end(
        self,
        event: Event,
        status: RunStatus,
        *more: Write,
        outputs: JsonDict | None = None,
        error: str | None = None,
        step: str | None = None,
        finished: str | None = None,
        elapsed: float | None = None,
    ) -> None:
        """The terminal event, the run's row as this execution leaves it, what else goes with them and the
        checkpoints the run no longer needs: one transaction; LeaseLost when this replica no longer owns
        the run."""
        row = store.end_run(
            self.run.id,
            status,
            outputs=outputs,
            error=error,
            error_step=step,
            finished=finished,
            elapsed=time.monotonic() - self.began if elapsed is None else elapsed,
            spend=self.spent,
        )
        with commit_level(self.ex.synchronous):  # the run's end is kept as its steps are
            await _end(
                self.db,
                self.thread,
                self.ex.trace,
                [*self.record.take(), event],
                row,
                *more,
                *_pruned(self.db, self.run, status),
                fence=self.fence,
            )


async def _announce(
    db: StateDB, seq: Sequencer, naming: Naming, wait: float, record: Callable[[Event], None]
) -> Event:
    """The thread_name event of a first turn (its name stored first, when the model gave one)."""
    naming.announced = True
    name = await naming.settle(wait)
    if name != naming.fallback and naming.store is not None:
        try:
            await db.writer.write(naming.store(name))
        except DB_ERRORS as exc:  # the fallback name stays; the turn goes on
            log.warning("thread %s: could not store its name: %s", naming.thread_id, exc)
            name = naming.fallback
    for call in naming.calls.made:  # the naming model's calls, recorded before the name they gave
        record(seq.make(MODEL_CALL, None, call.as_data()))
    event = seq.make(THREAD_NAME, None, {"thread_id": naming.thread_id, "name": name})
    record(event)
    return event


def _gate_of(value: Any) -> str | None:
    if isinstance(value, dict):
        gate = value.get("step") or value.get("gate")
        return str(gate) if gate is not None else None
    return None


class _Trace:
    """How an execution stores its events in its trace (`keep`: at all; `hold`: with checkpoints;
    `fence`: the guard of its writes on a replica). Called with each event as it happens."""

    def __init__(
        self, db: StateDB, thread: str, fence: fencing.Fence | None, *, keep: bool, hold: bool
    ) -> None:
        self.db, self.thread, self.fence, self.keep, self.hold = db, thread, fence, keep, hold
        self._events: list[Event] = []  # a run without checkpoints: rows not yet queued

    def __call__(self, event: Event) -> None:
        # trace rows ride along with the next commit: no transaction of their own; a step_finished row
        # (and what follows it) with the checkpoint that holds the step's result (durable.py, hold_trace).
        # On a replica each row carries the guard of its run (engine/state/fencing.py): a replica that
        # lost the run writes no more of its trace (its seq numbers are the new owner's now)
        fence = self.fence
        if not self.keep or event.type in NOT_STORED or (fence is not None and fence.lost):
            return
        if not self.hold:
            # nothing to wait for: queued together when the run's task next lets the loop in (a
            # step's await, or every few inline steps), one statement for them all
            if not self._events:
                asyncio.get_running_loop().call_soon(self._queue)
            self._events.append(event)
            return
        row = store.insert_events([event])
        if not self.db.saver.hold_trace(self.thread, row, begin=event.type == STEP_FINISHED):
            self.db.writer.write_nowait(
                *(fence.guarded([row]) if fence is not None else [row]), lazy=True
            )

    def _queue(self) -> None:
        events, fence = self.take(), self.fence
        if events and not (fence is not None and fence.lost):
            rows = [store.insert_events(events)]
            self.db.writer.write_nowait(
                *(fence.guarded(rows) if fence is not None else rows), lazy=True
            )

    def take(self) -> list[Event]:
        """The events whose rows are not queued yet, to store with what comes next (the run's end)."""
        events, self._events = self._events, []
        return events


def _pruned(db: StateDB, run: RunRecord, status: RunStatus) -> list[Write]:
    """The checkpoints a run no longer needs, deleted as it ends (docs/runtime.md, "What a finished run
    keeps"): a finished run keeps its last checkpoint, a stopped one what a resume goes on from. A
    conversation turn's thread is pruned by the turn itself (engine/runtime/turns.py): the thread
    goes on from its last finished turn, which a failed turn's latest checkpoint is not."""
    if run.thread_id is not None or run.mode in NO_CHECKPOINTS:  # (none: nothing was kept)
        return []
    return (
        db.saver.prune_finished(run.id)
        if status == RunStatus.FINISHED
        else db.saver.prune_stopped(run.id)
    )


async def _end(
    db: StateDB,
    thread: str,
    trace: bool,
    events: list[Event],
    end: Write,
    *more: Write,
    fence: fencing.Fence | None = None,
) -> None:
    # the terminal event (the last of `events`, after those not stored yet) and the run's new status in
    # one transaction: a reader never sees one without the other (with the trace rows still held for a
    # checkpoint: a failed run has none after its last step); LeaseLost when this replica no longer
    # owns the run: nothing was written
    event = events[-1]
    held = db.saver.take_trace(thread)
    rows = [store.insert_events(events)] if trace else []
    writes = [
        *held,
        *rows,
        end,
        *more,
    ]  # the pruning too: a replica that lost the run deletes nothing
    try:
        await db.writer.write(*(fence.guarded(writes) if fence is not None else writes))
    except GuardFailed:
        assert fence is not None
        fence.lost = True
        raise fencing.LeaseLost(f"run {event.run_id} was taken over by another server") from None
    except DB_ERRORS as exc:
        raise StateError(
            f"cannot record how run {event.run_id} ended in {db.location}: {exc}"
        ) from None


def _lost(
    db: StateDB, seq: Sequencer, thread: str, step: str | None, naming: Naming | None
) -> Event:
    """The end of an execution whose replica lost the run (engine/state/fencing.py): another replica
    goes on with it from its last checkpoint. Nothing more is written, not even this event."""
    db.saver.take_trace(thread)  # rows held for a checkpoint that will not be written
    if naming is not None:
        naming.cancel()
    log.warning("run %s: this server lost its lease; another server took the run over", seq.run_id)
    return seq.make(
        RUN_FAILED,
        step,
        {
            "status": RunStatus.INTERRUPTED,
            "step": step,
            "error": "this server lost its lease on the run: another server took it over",
        },
    )


async def collect(execution: Execution) -> RunResult:
    """Run an execution to its end; its result."""
    kept: list[Event] = []
    async with aclosing(execute(execution, ends_only=True)) as events:
        async for event in events:
            if event.type in TERMINAL_TYPES:
                kept.append(event)
    return RunResult.from_events(execution.run, kept)


async def _none() -> AsyncGenerator[tuple[str, Any], None]:
    """No graph to run: the execution only waits at its gates again."""
    return
    yield
