"""The observer of runs that traces them: told every event of every execution (engine/runtime/observe.py),
it keeps one `ExecutionTrace` per execution and hands each span, encoded as it ends, to the pipeline's batch.

Each execution of a run is one trace: its root span `invoke_workflow <flow>` carries
`blockyard.run_id`, and a run resumed in the same process links its new root to the previous one.
An execution started with a W3C traceparent (an HTTP caller's) continues the caller's trace instead,
its root the child of the caller's span. Whether an execution is traced at all is decided once, for
its root, and kept for its spans: by the sampler OTEL_TRACES_SAMPLER names (the SDK's, through
engine/telemetry/exporter.py, the one part of the SDK a run meets), or by default here: always,
unless the caller's traceparent says not sampled.

Quick by design. It is told on engine/core/later.py's thread, many executions in a row, where its code
stays warm; tokens are skipped first thing; the events of the execution the event before was
of (most are) find its trace without a lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from engine.core.events import APPROVAL_REQUIRED, TOKEN, Event
from engine.definitions.pinned import Bundle
from engine.state.store import RunRecord
from engine.telemetry import traceparent
from engine.telemetry.layout import Layout, layout
from engine.telemetry.spans import HANDLERS, Emit, ExecutionTrace, new_trace_id, time_ns

KEPT_RUNS = 4096  # roots remembered to link a resume to (runs resumed in this process)
KEPT_LAYOUTS = 256  # flow definitions whose layout is kept, by digest
KEPT_ENDED = 64  # executions that ended at a gate: more gates of theirs may follow at once
KEPT_LIVE = 10_000  # executions in progress at once, at most (more than any server runs)

# whether an execution is traced: its run, the caller's traceparent, its trace id (engine/telemetry/exporter.py)
Decide = Callable[[RunRecord, traceparent.Parent | None, bytes], bool]


class _Compiled(Protocol):
    @property
    def bundle(self) -> Bundle: ...


class Observed(Protocol):
    """What the observer reads of an execution (engine/runtime/execution.py, `Execution`)."""

    @property
    def compiled(self) -> _Compiled: ...

    @property
    def traceparent(self) -> str | None: ...


class TraceObserver:
    """Turns the events of every execution it is told about into spans, handed to `emit`. `decide`: whether an
    execution is traced (the sampler OTEL_TRACES_SAMPLER names, engine/telemetry/exporter.py), or None for the
    default, parent-based and always on, which this applies itself: the SDK's takes longer than the rest of a
    short execution's first event. Both may be set later, before the first execution (engine/telemetry/__init__.py).
    No OpenTelemetry here."""

    # what it is told (engine/runtime/observe.py): what makes or ends a span, on engine/core/later.py's
    # thread, many executions in a row (a trace may lag a second or so; a flush tells what waits)
    event_types = frozenset(HANDLERS)
    told_later = True

    def __init__(self, emit: Emit, decide: Decide | None = None, *, capture: bool = False) -> None:
        self.emit = emit
        self.decide = decide
        self.capture = capture
        # id(execution) -> (the execution, its trace; None: not sampled). The execution is held so that its
        # id is not reused while it is here
        self._live: dict[int, tuple[Observed, ExecutionTrace | None]] = {}
        self._ended: OrderedDict[int, tuple[Observed, ExecutionTrace]] = OrderedDict()
        # run id -> (trace id, span id) of its latest execution's root
        self._roots: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
        self._layouts: OrderedDict[str, Layout] = OrderedDict()
        # executions of several event loops (threads) share the maps above
        self._lock = threading.Lock()
        self._last: tuple[Observed | None, ExecutionTrace | None] = (
            _NONE  # the last event's execution (and trace)
        )

    def __call__(self, run: RunRecord, event: Event, execution: Observed) -> None:
        if event.type == TOKEN:
            return
        entry = self._last  # most events are of the execution the event before was of
        if entry[0] is not execution:
            entry = self._live.get(id(execution), _NONE)
            if entry[0] is not execution:
                self._first(run, event, execution)
                return
            self._last = entry
        traced = entry[1]
        if traced is None:
            if event.type in _ENDS:  # not sampled: nothing to record, only to forget at the end
                self._forget(execution)
            return
        # ExecutionTrace.see, inline (a call less on every event): the event's time, then what it does
        handler = HANDLERS.get(event.type)
        if handler is None:
            return
        text = event.time
        if text == traced.time:  # events of one millisecond
            at = traced.at
        elif text.startswith(traced.second):  # of one second: the milliseconds read only
            at = traced.at = traced.second_ns + int(text[20:23]) * 1_000_000
            traced.time = text
        else:
            at = traced.clock(text)
        if handler(traced, event, at):
            self._ended_trace(run, event, execution, traced)

    def _forget(self, execution: Observed) -> None:
        self._live.pop(id(execution), None)
        if self._last[0] is execution:
            self._last = _NONE

    def _first(self, run: RunRecord, event: Event, execution: Observed) -> None:
        """An execution's first event."""
        key = id(execution)
        if event.type == APPROVAL_REQUIRED and self._late_gate(key, execution, event):
            return
        entry = (execution, self._begin(run, execution, event))
        with self._lock:
            self._live[key] = entry
            if len(self._live) > KEPT_LIVE:  # executions whose end never came (their consumer left)
                del self._live[next(iter(self._live))]
        self._last = entry
        traced = entry[1]
        if traced is None:  # not sampled: nothing to record, only to forget at the end
            if event.type in _ENDS:
                self._forget(execution)
            return
        if traced.see(event):
            self._ended_trace(run, event, execution, traced)

    def _ended_trace(
        self, run: RunRecord, event: Event, execution: Observed, traced: ExecutionTrace
    ) -> None:
        key = id(execution)
        self._forget(execution)
        with self._lock:
            self._roots[run.id] = (
                traced.trace_id,
                traced.root.span_id,
            )  # a resume here links to it
            self._roots.move_to_end(run.id)
            while len(self._roots) > KEPT_RUNS:
                self._roots.popitem(last=False)
            if event.type == APPROVAL_REQUIRED:
                self._ended[key] = (execution, traced)
                while len(self._ended) > KEPT_ENDED:
                    self._ended.popitem(last=False)

    def _late_gate(self, key: int, execution: Observed, event: Event) -> bool:
        """A further gate of an execution that ended at its first one: a span of that trace."""
        entry = self._ended.get(key)
        if entry is None or entry[0] is not execution:
            return False
        entry[1].see(event)
        return True

    def _begin(self, run: RunRecord, execution: Observed, event: Event) -> ExecutionTrace | None:
        """The trace of a new execution, or None when the sampler drops it."""
        parent = traceparent.parse(execution.traceparent)
        trace_id = parent.trace_id.to_bytes(16, "big") if parent is not None else new_trace_id()
        if not self.sampled(run, parent, trace_id):
            return None
        # a read: atomic (the lock orders the writes, which are several steps)
        previous = self._roots.get(run.id)
        return ExecutionTrace(
            run,
            self._layout(run, execution),
            self.emit,
            time_ns(event.time),
            capture=self.capture,
            trace_id=trace_id,
            parent=parent.span_id.to_bytes(8, "big") if parent is not None else None,
            previous=previous,
        )

    def sampled(self, run: RunRecord, parent: traceparent.Parent | None, trace_id: bytes) -> bool:
        """Whether an execution (of `run`, continuing the caller's `parent`, in trace `trace_id`) is traced."""
        decide = self.decide
        if decide is None:
            # the default, parent-based and always on: the caller's traceparent decides
            return parent is None or parent.sampled
        return decide(run, parent, trace_id)

    def _layout(self, run: RunRecord, execution: Observed) -> Layout:
        found = self._layouts.get(run.digest)
        if found is None:
            found = layout(execution.compiled.bundle)
            with self._lock:
                self._layouts[run.digest] = found
                while len(self._layouts) > KEPT_LAYOUTS:
                    self._layouts.popitem(last=False)
        return found


_ENDS = frozenset({"run_finished", "run_failed", APPROVAL_REQUIRED})
_NONE: tuple[None, None] = (None, None)
