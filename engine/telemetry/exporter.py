"""The export pipeline of one destination: spans, encoded as they end, queued in a `Batch`
(engine/telemetry/batch.py: a thread of its own, tuned by the standard OTEL_BSP_* variables) and
posted by `OtlpHttpExporter` as OTLP/HTTP protobuf bodies (engine/telemetry/wire.py) to the traces URL.

What the OpenTelemetry SDK (the `otel` extra) does here: the sampler OTEL_TRACES_SAMPLER and
OTEL_TRACES_SAMPLER_ARG name, asked once per execution (engine/telemetry/observer.py), and the
resource's attributes (`Resource`, the SDK's version). Spans bypass its span objects and its
BatchSpanProcessor: they cost a traced run 9–15% of its CPU, against the 3% allowed
(docs/performance.md, "OpenTelemetry traces").

Sending never touches a run: spans wait in the batch; a destination that is down costs a few retries
within the export's deadline, then the body is dropped and one warning said (at most one a minute).
At the end of a command (`Yard.close()`, the server's shutdown) what is queued is sent within
FLUSH_SECONDS; at the process's exit the batch's thread is stopped within the same bound.

Imported only when a run is traced (the `otel` extra): engine/telemetry/__init__.py.
"""

from __future__ import annotations

import atexit
import gzip
import http.client
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Protocol

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Decision, Sampler
from opentelemetry.sdk.version import __version__ as sdk_version
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from engine.core import later
from engine.core.redaction import mask_url
from engine.core.version import __version__
from engine.state.store import RunRecord
from engine.telemetry import semconv, traceparent, wire
from engine.telemetry.batch import Batch
from engine.telemetry.observer import Decide, TraceObserver
from engine.telemetry.settings import Settings

log = logging.getLogger("blockyard.telemetry")

FLUSH_SECONDS = (
    5.0  # what closing a yard or a server, or the process's exit, waits for spans still queued
)
EXPORT_SECONDS = 10.0  # one export's deadline, retries included (the OTLP default timeout)
HURRIED_SECONDS = 2.0  # one try's timeout while a command ends
RETRY_STATUSES = frozenset({429, 502, 503, 504})  # transient, per the OTLP/HTTP specification
SCOPE = ("blockyard", __version__)  # the instrumentation scope of every span


class _Once:
    """Says a problem at most once a minute (a destination down would otherwise say it per batch)."""

    def __init__(self) -> None:
        self.last = 0.0
        self.lock = threading.Lock()

    def warn(self, message: str) -> None:
        now = time.monotonic()
        with self.lock:
            if self.last and now - self.last < 60:
                return
            self.last = now
        log.warning("warning: telemetry: %s", message)


_warnings = _Once()


class Exporter(Protocol):
    """Where a pipeline's bodies go: `export` gets one OTLP request body of `count` spans and says
    whether the destination took it."""

    def export(self, body: bytes, count: int) -> bool: ...


class OtlpHttpExporter:
    """Posts spans to an OTLP/HTTP traces URL as protobuf; retries what the OTLP spec calls transient."""

    def __init__(self, settings: Settings) -> None:
        self.url = settings.endpoint
        self.shown = mask_url(settings.endpoint)
        # one kept-alive connection (only the batch's thread sends): a new one per batch costs more than
        # encoding it; a proxy the environment names for the URL is honoured through urllib instead
        self.target = urllib.parse.urlsplit(settings.endpoint)
        self.path = self.target.path + (f"?{self.target.query}" if self.target.query else "")
        proxies = urllib.request.getproxies()
        self.proxied = self.target.scheme in proxies and not urllib.request.proxy_bypass(
            self.target.hostname or ""
        )
        self.connection: http.client.HTTPConnection | None = None
        self.headers = {
            **settings.header_map(),
            "content-type": "application/x-protobuf",
            "user-agent": f"blockyard/{__version__}",
        }
        self.gzip = settings.gzip
        if self.gzip:
            self.headers["content-encoding"] = "gzip"
        # set while a command ends (flush) or the process exits (stop): one quick try per batch, no retries
        self.hurry = False
        self.stopping = False
        self.wake = threading.Event()  # cuts a retry's wait short when hurried
        self.sent = 0  # spans accepted by the destination (tests and the benchmark read it)

    def export(self, body: bytes, count: int) -> bool:
        if self.gzip:
            body = gzip.compress(body, compresslevel=5)
        deadline = time.monotonic() + EXPORT_SECONDS
        wait = 0.5
        while True:
            left = max(0.5, deadline - time.monotonic())
            problem = self._post(body, min(left, HURRIED_SECONDS) if self.hurried else left)
            if problem is None:
                self.sent += count
                return True
            reason, transient = problem
            if (
                not transient
                or self.hurried
                or time.monotonic() + wait > deadline
                or self.wake.wait(wait)
                or self.hurried
            ):
                _warnings.warn(f"{count} span(s) could not be sent to {self.shown}: {reason}")
                return False
            wait *= 2

    @property
    def hurried(self) -> bool:
        return self.hurry or self.stopping

    def hurrying(self, on: bool) -> None:
        """Flush quickly: no retries, a short timeout (a destination that is down does not hold up a command)."""
        self.hurry = on
        if on:
            self.wake.set()
        elif not self.stopping:
            self.wake.clear()

    def _post(self, body: bytes, timeout: float) -> tuple[str, bool] | None:
        """None when the destination took the spans, else (why not, whether trying again may help)."""
        if self.proxied:
            return self._post_by_urllib(body, timeout)
        reused = self.connection is not None
        try:
            status, reason = self._send(body, timeout)
        except (OSError, http.client.HTTPException) as exc:
            self._disconnect()
            if not reused:
                return f"{exc}", True
            try:  # a kept-alive connection the destination closed meanwhile: once more, on a new one
                status, reason = self._send(body, timeout)
            except (OSError, http.client.HTTPException) as again:
                self._disconnect()
                return f"{again}", True
        except (
            Exception
        ) as exc:  # a broken TLS setup, a bad URL: said, never raised into the sending thread
            self._disconnect()
            return f"{type(exc).__name__}: {exc}", False
        if 200 <= status < 300:
            return None
        return f"HTTP {status} {reason}", status in RETRY_STATUSES

    def _send(self, body: bytes, timeout: float) -> tuple[int, str]:
        """POST on the kept-alive connection (made if needed): the answer's status and reason."""
        connection = self.connection
        if connection is None:
            kind = (
                http.client.HTTPSConnection
                if self.target.scheme == "https"
                else http.client.HTTPConnection
            )
            connection = self.connection = kind(
                self.target.hostname or "localhost", self.target.port, timeout=timeout
            )
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        connection.request("POST", self.path, body=body, headers=self.headers)
        answer = connection.getresponse()
        answer.read()
        if answer.will_close:
            self._disconnect()
        return answer.status, answer.reason

    def _disconnect(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _post_by_urllib(self, body: bytes, timeout: float) -> tuple[str, bool] | None:
        """Through the proxy the environment names for the URL (HTTPS_PROXY and the like), as urllib does."""
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                answer.read()
            return None
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code} {exc.reason}", exc.code in RETRY_STATUSES
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            return f"{reason}", True
        except (
            Exception
        ) as exc:  # a bad URL, a broken TLS setup: said, never raised into the sending thread
            return f"{type(exc).__name__}: {exc}", False

    def shutdown(self) -> None:
        self.stopping = True
        self.wake.set()
        self._disconnect()


def decision(sampler: Sampler) -> Decide | None:
    """How `sampler` decides whether an execution is traced; None for the SDK's default (parent-based, always
    on), which the observer applies itself."""
    if sampler is DEFAULT_ON:
        return None

    def decide(run: RunRecord, parent: traceparent.Parent | None, trace_id: bytes) -> bool:
        context = None
        if parent is not None:
            flags = TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT)
            context = trace.set_span_in_context(
                NonRecordingSpan(SpanContext(parent.trace_id, parent.span_id, True, flags))
            )
        made = sampler.should_sample(
            context,
            int.from_bytes(trace_id, "big"),
            f"{semconv.WORKFLOW} {run.flow}",
            SpanKind.INTERNAL,
            {"blockyard.run_id": run.id},
        )
        return made.decision is Decision.RECORD_AND_SAMPLE

    return decide


class Pipeline:
    """One destination: its batch and exporter, and the observer that feeds them (made here, or `observer`,
    which is wired to them). `batch=False`: each span is exported as it ends, on the run's thread (tests)."""

    def __init__(
        self,
        settings: Settings,
        exporter: Exporter | None = None,
        *,
        batch: bool = True,
        observer: TraceObserver | None = None,
    ) -> None:
        self.settings = settings
        self.exporter = exporter if exporter is not None else OtlpHttpExporter(settings)
        attributes: dict[str, str] = {
            "telemetry.sdk.language": "python",
            "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.version": sdk_version,
            "service.version": __version__,
            **dict(settings.resource),
            "service.name": settings.service_name,
        }
        # the request's resource and scope, encoded once: each body is them and its spans' bytes
        self.resource = wire.resource(Resource(attributes).attributes)
        self.scope = wire.scope(*SCOPE)
        self.batch = Batch(self.send, settings.batching, _warnings.warn) if batch else None
        # the sampler OTEL_TRACES_SAMPLER names, as a tracer would use it
        decide = decision(TracerProvider(shutdown_on_exit=False).sampler)
        emit = self.batch.add if self.batch is not None else self._now
        if observer is None:
            observer = TraceObserver(emit, decide, capture=settings.capture_content)
        else:
            observer.emit, observer.decide = emit, decide
        self.observer = observer
        self.closed = False
        for problem in settings.problems:
            log.warning("warning: telemetry: %s", problem)

    def send(self, spans: list[bytes]) -> None:
        """Encode one body of `spans` and export it (the batch's thread)."""
        self.exporter.export(wire.request(self.resource, self.scope, spans), len(spans))

    def _now(self, span: bytes) -> None:
        self.send([span])

    def flush(self, timeout: float = FLUSH_SECONDS) -> None:
        """Send what is queued, waiting at most `timeout` seconds (a destination that is down may take
        longer: the rest goes on in the background until the process exits)."""
        later.flush()  # the observer told what waits: the spans of the runs so far are queued
        if self.closed or self.batch is None:
            return
        exporter = self.exporter if isinstance(self.exporter, OtlpHttpExporter) else None
        if exporter is not None:
            exporter.hurrying(True)
        try:
            self.batch.flush(timeout)
        finally:
            if exporter is not None:
                exporter.hurrying(False)

    def shutdown(self, timeout: float = FLUSH_SECONDS) -> None:
        """Send what is queued (one try per body: no retries at exit) and stop, within `timeout` seconds."""
        if self.closed:
            return
        self.closed = True
        if isinstance(self.exporter, OtlpHttpExporter):
            self.exporter.shutdown()  # no retries from here on; the batch still sends what is queued
        if self.batch is not None:
            self.batch.stop(timeout)


_pipelines: dict[Settings, Pipeline] = {}
_lock = threading.Lock()


def pipeline(settings: Settings, observer: TraceObserver) -> Pipeline:
    """The process's pipeline to these settings' destination (one per destination, shared by every
    yard and server of the process, as `observer` is), made on first use and shut down at exit."""
    with _lock:
        found = _pipelines.get(settings)
        if found is None:
            if not _pipelines:
                atexit.register(_shutdown_all)
            found = _pipelines[settings] = Pipeline(settings, observer=observer)
        return found


def _shutdown_all() -> None:
    later.flush()  # the spans of events not told yet (registered before this, its own exit flush comes after)
    with _lock:
        pipelines = list(_pipelines.values())
    for each in pipelines:
        try:
            each.shutdown()
        except Exception as exc:  # the process is exiting: a word, never a traceback
            _warnings.warn(f"the last spans may be lost ({type(exc).__name__}: {exc})")
