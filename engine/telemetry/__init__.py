"""OpenTelemetry traces of runs (docs/observability.md, "OpenTelemetry traces").

    telemetry = start(project.config.telemetry, env)      # None: traces are off
    if telemetry is not None:
        engine.observers.append(telemetry.observer)       # told every event (engine/runtime/observe.py)
    ...
    telemetry.flush()                                     # at the end of a command, a server's shutdown

`start` reads only the settings (blockyard.yaml's `telemetry:`, the OTEL_* variables:
engine/telemetry/settings.py). OpenTelemetry's SDK (the `otel` extra: its sampler and resource) is
imported when the first event of a run arrives, so commands that run nothing never load it; without
it, one warning says what to install and runs go on untraced. The parts: settings.py (what and
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
from typing import Any

from engine import extras
from engine.events import TOKEN, Event
from engine.spec.config import TelemetrySpec
from engine.state.store import RunRecord
from engine.telemetry.settings import Settings, resolve

log = logging.getLogger("blockyard.telemetry")
EXTRA = "otel"

_missing_said = threading.Event()  # the missing SDK is said once per process


class Telemetry:
    """Traces to one destination. `observer` is what an engine tells its events to; the pipeline
    behind it (engine/telemetry/exporter.py) is made, and shared, on the first event."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._target: Any = None  # the pipeline's observer; False: the SDK is missing
        self._pipeline: Any = None

    def observer(self, run: RunRecord, event: Event, execution: Any) -> None:
        if event.type == TOKEN:  # a streamed piece of a reply: never a span's business, and the most frequent
            return
        target = self._target
        if target is None:
            target = self._load()
        if target is not False:
            target(run, event, execution)

    def _load(self) -> Any:
        try:
            from engine.telemetry.exporter import pipeline  # the otel extra's SDK: only once a run is traced
        except ImportError:
            self._target = False
            if not _missing_said.is_set():
                _missing_said.set()
                log.warning("warning: telemetry: runs are not traced: %s", extras.missing(EXTRA))
            return False
        self._pipeline = pipeline(self.settings)
        self._target = self._pipeline.observer
        return self._target

    def flush(self) -> None:
        """Send the spans still queued (bounded: engine/telemetry/exporter.py, FLUSH_SECONDS)."""
        if self._pipeline is not None:
            self._pipeline.flush()


def start(spec: TelemetrySpec | None, env: Mapping[str, str] | None = None) -> Telemetry | None:
    """The traces a yard with `telemetry:` `spec` exports in environment `env` (default: os.environ),
    or None when they are off."""
    settings = resolve(spec, env if env is not None else os.environ)
    return Telemetry(settings) if settings is not None else None
