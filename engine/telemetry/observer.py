"""The observer of runs that traces them: told every event of every execution (engine/runtime/observe.py),
it keeps one `ExecutionTrace` per execution and hands each span, encoded as it ends, to the pipeline's batch.

Each execution of a run is one trace: its root span `invoke_workflow <flow>` carries
`blockyard.run_id`, and a run resumed in the same process links its new root to the previous one.
An execution started with a W3C traceparent (an HTTP caller's) continues the caller's trace instead,
its root the child of the caller's span. Whether an execution is traced at all is the sampler's
call (the OpenTelemetry SDK's, as OTEL_TRACES_SAMPLER names it; by default: always, unless the
caller's traceparent says not sampled), made once for its root and kept for its spans: the one part
of the SDK a run meets.

Quick by design: it runs on the run's event loop between two events. Tokens are skipped first thing;
the events of the execution the event before was of (most are) find its trace without a lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import Decision, Sampler
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from engine.events import APPROVAL_REQUIRED, TOKEN, Event
from engine.pinned import Bundle
from engine.state.store import RunRecord
from engine.telemetry import semconv, traceparent
from engine.telemetry.layout import Layout, layout
from engine.telemetry.spans import Emit, ExecutionTrace, new_trace_id, time_ns

KEPT_RUNS = 4096  # roots remembered to link a resume to (runs resumed in this process)
KEPT_LAYOUTS = 256  # flow definitions whose layout is kept, by digest
KEPT_ENDED = 64  # executions that ended at a gate: more gates of theirs may follow at once
KEPT_LIVE = 10_000  # executions in progress at once, at most (more than any server runs)


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
    """Turns the events of every execution it is told about into spans, handed to `emit`. `sampler`: the
    one OTEL_TRACES_SAMPLER names, or None for the default (parent-based, always on), which this decides
    itself: the SDK's takes longer than the rest of a short execution's first event."""

    def __init__(self, emit: Emit, sampler: Sampler | None, *, capture: bool = False) -> None:
        self.emit = emit
        self.sampler = sampler
        self.capture = capture
        # id(execution) -> (the execution, its trace; None: not sampled). The execution is held so that its
        # id is not reused while it is here
        self._live: dict[int, tuple[Observed, ExecutionTrace | None]] = {}
        self._ended: OrderedDict[int, tuple[Observed, ExecutionTrace]] = OrderedDict()
        # run id -> (trace id, span id) of its latest execution's root
        self._roots: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
        self._layouts: OrderedDict[str, Layout] = OrderedDict()
        self._lock = threading.Lock()  # executions of several event loops (threads) share the maps above
        self._last: tuple[Observed | None, ExecutionTrace | None] = _NONE  # the last event's execution (and trace)

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
        if traced is not None:
            if traced.see(event):
                self._ended_trace(run, event, execution, traced)
        elif event.type in _ENDS:  # not sampled: nothing to record, only to forget at the end
            self._forget(execution)

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

    def _ended_trace(self, run: RunRecord, event: Event, execution: Observed, traced: ExecutionTrace) -> None:
        key = id(execution)
        self._forget(execution)
        with self._lock:
            self._roots[run.id] = (traced.trace_id, traced.root.span_id)  # a resume here links to it
            self._roots.move_to_end(run.id)
            while len(self._roots) > KEPT_RUNS:
                self._roots.popitem(last=False)
            if event.type == APPROVAL_REQUIRED:
                self._ended[key] = (execution, traced)
                while len(self._ended) > KEPT_ENDED:
                    self._ended.popitem(last=False)

    def _late_gate(self, key: int, execution: Observed, event: Event) -> bool:
        """A further gate of an execution that ended at its first one: a span of that trace."""
        with self._lock:
            entry = self._ended.get(key)
        if entry is None or entry[0] is not execution:
            return False
        entry[1].see(event)
        return True

    def _begin(self, run: RunRecord, execution: Observed, event: Event) -> ExecutionTrace | None:
        """The trace of a new execution, or None when the sampler drops it."""
        parent = traceparent.parse(execution.traceparent)
        trace_id = parent.trace_id.to_bytes(16, "big") if parent is not None else new_trace_id()
        if self.sampler is None:  # the default, parent-based and always on: the caller's traceparent decides
            if parent is not None and not parent.sampled:
                return None
        elif not self._sampled(run, parent, trace_id):
            return None
        with self._lock:
            previous = self._roots.get(run.id)
        return ExecutionTrace(run, self._layout(run, execution), self.emit, time_ns(event.time), capture=self.capture,
                              trace_id=trace_id,
                              parent=parent.span_id.to_bytes(8, "big") if parent is not None else None,
                              previous=previous)

    def _sampled(self, run: RunRecord, parent: traceparent.Parent | None, trace_id: bytes) -> bool:
        """The sampler's decision for an execution's root (a sampler OTEL_TRACES_SAMPLER names)."""
        assert self.sampler is not None
        context = None
        if parent is not None:
            flags = TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT)
            context = trace.set_span_in_context(NonRecordingSpan(SpanContext(parent.trace_id, parent.span_id, True,
                                                                             flags)))
        decision = self.sampler.should_sample(context, int.from_bytes(trace_id, "big"),
                                              f"{semconv.WORKFLOW} {run.flow}", SpanKind.INTERNAL,
                                              {"blockyard.run_id": run.id})
        return decision.decision is Decision.RECORD_AND_SAMPLE

    def _layout(self, run: RunRecord, execution: Observed) -> Layout:
        with self._lock:
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
