"""Observers of runs: told every event of every execution as the runtime yields it, with the run's
record — how OpenTelemetry export (engine/telemetry) and the server's metrics see runs without
the runtime knowing either.

An observer must be quick (it runs on the run's event loop, between two events) and must not
fail: a failure is logged once per observer and the run goes on untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from engine.events import Event
from engine.state.store import RunRecord

log = logging.getLogger("blockyard.observe")


class Observer(Protocol):
    # `execution`: the engine/runtime/execution.py `Execution` (its `traceparent`, `compiled`, `context`);
    # typed Any so that this module, which execution.py imports, imports nothing of it
    def __call__(self, run: RunRecord, event: Event, execution: Any) -> None: ...


_failed: set[int] = set()  # observers whose failure was logged already


def teller(observers: Sequence[Observer], run: RunRecord, execution: Any) -> Callable[[Event], None] | None:
    """What tells an execution's observers each of its events before the runtime yields it (None: nobody
    observes). A function the runtime calls at its yields, not a generator around its events: every event
    of a run would pass one more generator (engine/runtime/execution.py)."""
    if not observers:
        return None

    def tell(event: Event) -> None:
        for observer in observers:
            try:
                observer(run, event, execution)
            except Exception as exc:  # an exporter's bug or a full queue: never the run's problem
                if id(observer) not in _failed:
                    _failed.add(id(observer))
                    log.warning("an observer of runs failed (%s: %s); the runs go on", type(exc).__name__, exc)

    return tell
