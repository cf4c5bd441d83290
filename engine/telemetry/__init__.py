"""OpenTelemetry traces of runs (docs/observability.md, "OpenTelemetry traces").

    telemetry = start(project.config.telemetry, env)      # None: traces are off
    if telemetry is not None:
        engine.observers.append(telemetry.observer)       # told every event (engine/runtime/observe.py)
    ...
    telemetry.flush()                                     # at the end of a command, a server's shutdown

`start` reads only the settings (blockyard.yaml's `telemetry:`, the OTEL_* variables:
engine/telemetry/settings.py); a yard that traces loads the observer (no OpenTelemetry in it).
OpenTelemetry's SDK (the `otel` extra: its sampler and resource) and the pipeline are loaded when the
first execution to trace begins, so commands that run nothing never load them; without the SDK, one
warning says what to install and runs go on untraced. The parts: settings.py (what and
where), traceparent.py (a caller's trace), layout.py (whose child a step is), semconv.py (span names
and attributes), spans.py (the span tree of an execution, each span encoded as it ends), observer.py
(executions to trees), wire.py (OTLP protobuf), batch.py (the spans waiting and the thread that sends
them), exporter.py (the pipeline of one destination, and posting).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from engine.core import extras, later
from engine.spec.config import TelemetrySpec
from engine.state.store import RunRecord
from engine.telemetry.settings import Settings, resolve

if TYPE_CHECKING:
    from engine.telemetry.exporter import Pipeline
    from engine.telemetry.observer import TraceObserver
    from engine.telemetry.traceparent import Parent

log = logging.getLogger("blockyard.telemetry")
EXTRA = "otel"

_missing_said = threading.Event()  # the missing SDK is said once per process
_lock = threading.Lock()
_observers: dict[
    Settings, TraceObserver
] = {}  # one per destination, shared by the process's yards and servers
_pipelines: dict[Settings, Pipeline] = {}  # those loaded: the first execution to trace loads one


class Telemetry:
    """Traces to one destination. `observer` is what an engine tells its events to (engine/runtime/observe.py):
    the destination's TraceObserver, no OpenTelemetry in it, told each event directly. The pipeline behind it
    (engine/telemetry/exporter.py: the SDK's sampler, the batch, the exporter) is made, and shared, when the
    first execution to trace begins."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.observer = _observer(settings)

    def flush(self) -> None:
        """Send the spans still queued (bounded: engine/telemetry/exporter.py, FLUSH_SECONDS), those of the
        events the observer has not been told yet too (engine/core/later.py)."""
        later.flush()
        pipeline = _pipelines.get(self.settings)
        if pipeline is not None:
            pipeline.flush()


def start(spec: TelemetrySpec | None, env: Mapping[str, str] | None = None) -> Telemetry | None:
    """The traces a yard with `telemetry:` `spec` exports in environment `env` (default: os.environ),
    or None when they are off."""
    settings = resolve(spec, env if env is not None else os.environ)
    return Telemetry(settings) if settings is not None else None


def _observer(settings: Settings) -> TraceObserver:
    # no OpenTelemetry in it: only a yard that traces loads it
    from engine.telemetry.observer import TraceObserver

    with _lock:
        found = _observers.get(settings)
        if found is None:
            found = _observers[settings] = TraceObserver(
                _nowhere, partial(_first, settings), capture=settings.capture_content
            )
        return found


def _first(settings: Settings, run: RunRecord, parent: Parent | None, trace_id: bytes) -> bool:
    """The decision on the first execution to trace: the SDK (the otel extra) and the pipeline are loaded now,
    and take over the observer's decisions and spans; without the SDK, nothing is traced (said once)."""
    observer = _observers[settings]
    try:
        # the otel extra's SDK: only once a run is traced
        from engine.telemetry.exporter import pipeline
    except ImportError:
        observer.decide = _never
        if not _missing_said.is_set():
            _missing_said.set()
            log.warning("warning: telemetry: runs are not traced: %s", extras.missing(EXTRA))
        return False
    _pipelines[settings] = pipeline(settings, observer)
    return observer.sampled(run, parent, trace_id)


def _nowhere(span: bytes) -> None:
    """The observer's spans before its pipeline is made: there are none (its first decision makes it)."""


def _never(run: RunRecord, parent: Any, trace_id: bytes) -> bool:
    return False
