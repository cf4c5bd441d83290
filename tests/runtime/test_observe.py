"""How the runtime tells its observers (engine/runtime/observe.py): in order, in batches, all of an
execution's events by the event that ends it, each observer only the types it asked for, a failing
observer logged once and never the run's problem; an observer that may lag told on the thread of
engine/core/later.py, in order, and at once on a flush. End to end through runs: tests/telemetry and
tests/serve/test_metrics_observer.py."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from engine.core import later
from engine.core.events import RunStatus, Sequencer
from engine.runtime import observe
from engine.serve.metrics import Metrics
from engine.state.store import RunRecord
from engine.telemetry.observer import TraceObserver
from engine.telemetry.spans import HANDLERS

RUN = RunRecord(id="r1", flow="f", version=1, digest="d", status=RunStatus.RUNNING, inputs={})
EXECUTION = object()


class Keeper:
    """An observer that keeps the types it was told, optionally only some."""

    def __init__(self, types: set[str] | None = None) -> None:
        self.told: list[str] = []
        if types is not None:
            self.event_types = frozenset(types)

    def __call__(self, run: RunRecord, event: Any, execution: Any) -> None:
        assert run is RUN and execution is EXECUTION
        self.told.append(event.type)


def _tell(observers: list[Any], types: list[str], *, late: float | None = None) -> None:
    async def go() -> None:
        tell = observe.teller(observers, RUN, EXECUTION)
        assert tell is not None
        seq = Sequencer(RUN.id)
        for kind in types:
            tell(seq.make(kind, "s"))
        if late is not None:
            await asyncio.sleep(late)

    asyncio.run(go())


def test_nobody_observing_costs_nothing() -> None:
    assert observe.teller([], RUN, EXECUTION) is None


def test_an_execution_s_events_wait_and_are_all_told_in_order_by_its_end() -> None:
    keeper = Keeper()
    middle = ["run_started", "step_started", "token", "step_finished"]
    _tell([keeper], middle)
    assert keeper.told == []  # fewer than a batch, no end, the timer not due: waiting
    for end in ("run_finished", "run_failed", "approval_required"):
        keeper = Keeper()
        _tell([keeper], [*middle, end])
        assert keeper.told == [*middle, end]


def test_a_full_batch_is_told_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observe, "BATCH", 3)
    keeper = Keeper()
    _tell([keeper], ["run_started", "step_started", "step_finished", "step_started"])
    assert keeper.told == ["run_started", "step_started", "step_finished"]


def test_events_wait_at_most_late_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observe, "LATE", 0.05)
    keeper = Keeper()
    _tell([keeper], ["run_started", "step_started"], late=0.5)
    assert keeper.told == ["run_started", "step_started"]


def test_an_observer_is_told_only_the_types_it_asked_for() -> None:
    steps, everything = Keeper({"step_finished"}), Keeper()
    _tell(
        [steps, everything],
        ["run_started", "step_started", "token", "step_finished", "run_finished"],
    )
    assert steps.told == ["step_finished"]
    assert everything.told == [
        "run_started",
        "step_started",
        "token",
        "step_finished",
        "run_finished",
    ]


def test_an_event_nobody_asked_for_is_not_kept() -> None:
    steps = Keeper({"step_finished"})
    tell = observe.teller([steps], RUN, EXECUTION)
    assert isinstance(tell, observe._Teller)
    seq = Sequencer(RUN.id)
    for kind in ("token", "step_started", "step_finished"):
        tell(seq.make(kind, "s"))
    assert [event.type for event in tell.pending] == ["step_finished"]
    tell(seq.make("run_finished"))  # an end is kept, to tell what waits, though nobody asked for it
    assert steps.told == ["step_finished"] and tell.pending == [] and tell.timer is None


def test_a_failing_observer_is_logged_once_and_the_others_are_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(run: RunRecord, event: Any, execution: Any) -> None:
        raise RuntimeError("exporter bug")

    keeper = Keeper()
    with caplog.at_level(logging.WARNING, logger="blockyard.observe"):
        _tell([broken, keeper], ["run_started", "step_started", "run_finished"])
        _tell([broken, keeper], ["run_started", "run_finished"])
    assert keeper.told == [
        "run_started",
        "step_started",
        "run_finished",
        "run_started",
        "run_finished",
    ]
    said = [record.getMessage() for record in caplog.records]
    assert said == ["an observer of runs failed (RuntimeError: exporter bug); the runs go on"]


def test_the_product_s_observers_ask_for_what_they_handle() -> None:
    assert observe.wanted(TraceObserver(lambda span: None)) == frozenset(HANDLERS)
    metrics = Metrics()
    assert observe.wanted(metrics.observe) == frozenset(metrics._handlers)
    assert "token" not in frozenset(HANDLERS) | frozenset(metrics._handlers)


class Lagging(Keeper):
    """A Keeper that may be told late (`told_later`), and notes the thread it was told on."""

    told_later = True

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def __call__(self, run: RunRecord, event: Any, execution: Any) -> None:
        self.threads.add(threading.get_ident())
        super().__call__(run, event, execution)


def test_an_observer_that_may_lag_is_told_on_the_later_thread_in_order() -> None:
    lagging, now = Lagging(), Keeper()
    later.flush()
    gate = threading.Lock()
    with gate:  # the later thread is kept from the pieces until both executions have ended
        later.put(gate.acquire)
        _tell([lagging, now], ["run_started", "step_started", "run_finished"])
        _tell([lagging, now], ["run_started", "run_failed"])
        # the other observer was told on the run's thread, at each end; this one not yet
        assert now.told == [
            "run_started",
            "step_started",
            "run_finished",
            "run_started",
            "run_failed",
        ]
        assert lagging.told == []
    deadline = time.monotonic() + 10
    while (
        len(lagging.told) < 5 and time.monotonic() < deadline
    ):  # the thread's delay is a fraction of a second
        time.sleep(0.01)
    assert lagging.told == now.told
    thread = later.thread()
    assert thread is not None and lagging.threads == {thread.ident}


def test_a_flush_tells_at_once_what_waits() -> None:
    lagging = Lagging()
    _tell([lagging], ["run_started", "step_started", "run_finished"])
    later.flush()
    assert lagging.told == ["run_started", "step_started", "run_finished"]


def test_the_traces_and_the_metrics_may_lag_and_others_do_not() -> None:
    assert observe._lags(TraceObserver(lambda span: None))
    assert observe._lags(Metrics().observe)
    assert not observe._lags(Keeper())


def test_a_failing_piece_is_said_and_the_next_ones_are_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[int] = []

    def broken() -> None:
        raise RuntimeError("a bug")

    with caplog.at_level(logging.WARNING, logger="blockyard.later"):
        later.put(broken)
        later.put(done.append, 1)
        later.flush()
    assert done == [1]
    assert "work done later failed (RuntimeError: a bug)" in caplog.text
