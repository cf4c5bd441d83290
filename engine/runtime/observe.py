"""Observers of runs: told every event of every execution, with the run's record — how OpenTelemetry
export (engine/telemetry) and the server's metrics see runs without the runtime knowing either.

An observer must be quick (it runs on the run's event loop) and must not fail: a failure is logged
once per observer and the run goes on untouched.

Observers are told in batches, not at each event: the runtime only appends an event to its
execution's list, and the list is told, observer by observer, once it holds `BATCH` events, once
`LATE` seconds passed since its first (a timer on the run's loop), and at once when the execution
ends (finished, failed, interrupted, waiting at a gate), before that event is yielded. The run's own
work per event is then an append; the observers' work is done in a row, though measured in a run it
costs about what it did told event by event: their code and data are cold after the run's own steps
either way (bench/bench_telemetry.py, docs/performance.md "OpenTelemetry traces"). Nothing they
record depends on when they are told: an event carries its own time and durations. An observer may say
which event types it wants (`told_only`): it is told no others, and an event no observer wants (a
streamed token, which the `model_call` that ends its stream sums up) is not even kept.

An observer that may lag (`told_later`: the traces, the server's metrics) is not told on the run's
thread at all: its batches are handed to engine/core/later.py, whose thread tells many executions'
events in a row, up to a second later, where the same work costs less than between a run's steps
(docs/performance.md, "OpenTelemetry traces"), and the run's wall time carries none of it. Whoever
reads what it made first calls `later.flush()` (sending a command's spans, a scrape of the metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from engine.core import later
from engine.core.events import TERMINAL_TYPES, Event
from engine.state.store import RunRecord

log = logging.getLogger("blockyard.observe")


class Observer(Protocol):
    # `execution`: the engine/runtime/execution.py `Execution` (its `traceparent`, `compiled`, `context`);
    # typed Any so that this module, which execution.py imports, imports nothing of it
    def __call__(self, run: RunRecord, event: Event, execution: Any) -> None: ...


BATCH = 256  # events told at once, at most
LATE = 1.0  # seconds an event may wait to be told, at most (the execution's end tells at once)
_ENDS = TERMINAL_TYPES  # the events that end an execution (an interruption is a run_failed)
F = TypeVar("F", bound=Callable[..., None])


def told_only(types: Iterable[str]) -> Callable[[F], F]:
    """Mark an observer (a function, or the method a bound observer is made of) as told only events of
    `types`. An observer object says it with an `event_types` attribute."""
    wanted = frozenset(types)

    def mark(observer: F) -> F:
        observer.event_types = wanted  # type: ignore[attr-defined]
        return observer

    return mark


def told_later(observer: F) -> F:
    """Mark an observer (a function, or the method a bound observer is made of) as one that may be told a
    second or so late, on engine/core/later.py's thread (see the module's docstring). An observer
    object says it with a true `told_later` attribute."""
    observer.told_later = True  # type: ignore[attr-defined]
    return observer


def wanted(observer: Observer) -> frozenset[str] | None:
    """The event types `observer` is told (None: every one)."""
    types = getattr(observer, "event_types", None)
    return frozenset(types) if types is not None else None


_failed: set[int] = set()  # observers whose failure was logged already


class _Teller:
    """An execution's events waiting to be told to its observers (see the module's docstring)."""

    __slots__ = ("execution", "kept", "later", "observers", "pending", "run", "timer")

    def __init__(self, observers: Sequence[Observer], run: RunRecord, execution: Any) -> None:
        told = [(observer, wanted(observer)) for observer in observers]
        self.observers = tuple(pair for pair in told if not _lags(pair[0]))
        self.later = tuple(pair for pair in told if _lags(pair[0]))
        # the event types worth keeping (None: all): those some observer wants, and the ends, which tell
        self.kept: frozenset[str] | None = frozenset(_ENDS)
        for _observer, types in told:
            self.kept = None if types is None or self.kept is None else self.kept | types
        self.run = run
        self.execution = execution
        self.pending: list[Event] = []
        self.timer: asyncio.TimerHandle | None = None

    def __call__(self, event: Event) -> None:
        kind = event.type
        kept = self.kept
        if kept is not None and kind not in kept:
            return
        pending = self.pending
        pending.append(event)
        if kind in _ENDS or len(pending) >= BATCH:
            self.tell()
        elif self.timer is None:
            # driven without a loop (no timer): told at a full batch and at the end only
            with contextlib.suppress(RuntimeError):
                self.timer = asyncio.get_running_loop().call_later(LATE, self.tell)

    def tell(self) -> None:
        """Tell the observers what waits: each observer all of it that it wants, in order."""
        timer = self.timer
        if timer is not None:
            self.timer = None
            timer.cancel()
        pending = self.pending
        if not pending:
            return
        self.pending = []
        if self.observers:
            _tell(self.observers, self.run, self.execution, pending)
        if self.later:
            later.put(_tell, self.later, self.run, self.execution, pending)


def _lags(observer: Observer) -> bool:
    return bool(getattr(observer, "told_later", False))


def _tell(
    observers: tuple[tuple[Observer, frozenset[str] | None], ...],
    run: RunRecord,
    execution: Any,
    pending: list[Event],
) -> None:
    """Tell each observer all of `pending` that it wants, in order."""
    for observer, types in observers:
        for event in pending:
            if types is not None and event.type not in types:
                continue
            try:
                observer(run, event, execution)
            except Exception as exc:  # an exporter's bug or a full queue: never the run's problem
                if id(observer) not in _failed:
                    _failed.add(id(observer))
                    log.warning(
                        "an observer of runs failed (%s: %s); the runs go on",
                        type(exc).__name__,
                        exc,
                    )


def teller(
    observers: Sequence[Observer], run: RunRecord, execution: Any
) -> Callable[[Event], None] | None:
    """What the runtime hands each event of an execution to, before it yields it (None: nobody observes).
    A function the runtime calls at its yields, not a generator around its events: every event of a
    run would pass one more generator (engine/runtime/execution.py)."""
    if not observers:
        return None
    return _Teller(observers, run, execution)
