"""A loopback OTLP/HTTP traces receiver: what a collector, Phoenix or Jaeger is to the engine's exporter
(engine/telemetry), for tests and the benchmark.

    with OtlpSink() as sink:          # http://127.0.0.1:<port>/v1/traces
        ...                           # OTEL_EXPORTER_OTLP_ENDPOINT=sink.base_url
        spans = sink.wait_for(lambda spans: any(s.name == "invoke_workflow hello" for s in spans))

Bodies are decoded with the official protobuf classes (opentelemetry-proto), so a span that arrives here
is one a real receiver reads. `python -m tests.support.otlp_sink` runs one that accepts and discards
(bench/bench_telemetry.py), printing its port.
"""

from __future__ import annotations

import gzip
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class SpanRecord:
    """One received span, its ids as hex."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: int  # OTLP's: 1 internal, 3 client
    start: int
    end: int
    attributes: dict[str, Any]
    status: int  # 0 unset, 2 error
    status_message: str
    flags: int
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: tuple[str, str] = ("", "")


def value(item: AnyValue) -> Any:
    kind = item.WhichOneof("value")
    if kind == "array_value":
        return [value(each) for each in item.array_value.values]
    if kind == "kvlist_value":
        return {pair.key: value(pair.value) for pair in item.kvlist_value.values}
    return getattr(item, kind) if kind is not None else None


def decode(body: bytes) -> list[SpanRecord]:
    """The spans of an OTLP/HTTP protobuf request body."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        resource = {pair.key: value(pair.value) for pair in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            scope = (scope_spans.scope.name, scope_spans.scope.version)
            for span in scope_spans.spans:
                found.append(
                    SpanRecord(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex() or None,
                        kind=span.kind,
                        start=span.start_time_unix_nano,
                        end=span.end_time_unix_nano,
                        attributes={pair.key: value(pair.value) for pair in span.attributes},
                        status=span.status.code,
                        status_message=span.status.message,
                        flags=span.flags,
                        events=[
                            (event.name, {pair.key: value(pair.value) for pair in event.attributes})
                            for event in span.events
                        ],
                        links=[
                            (
                                link.trace_id.hex(),
                                link.span_id.hex(),
                                {pair.key: value(pair.value) for pair in link.attributes},
                            )
                            for link in span.links
                        ],
                        resource=resource,
                        scope=scope,
                    )
                )
    return found


class OtlpSink:
    """The receiver on 127.0.0.1 at a free port; `keep=False` accepts and forgets (the benchmark)."""

    def __init__(self, *, keep: bool = True, status: int = 200) -> None:
        self.keep = keep
        self.status = status
        self.bodies: list[tuple[dict[str, str], bytes]] = []
        self.received = 0  # requests answered
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-sink", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def spans(self) -> list[SpanRecord]:
        with self._lock:
            bodies = [body for _headers, body in self.bodies]
        return [span for body in bodies for span in decode(body)]

    def headers(self) -> list[dict[str, str]]:
        with self._lock:
            return [headers for headers, _body in self.bodies]

    def wait_for(
        self, done: Callable[[list[SpanRecord]], bool], timeout: float = 30.0
    ) -> list[SpanRecord]:
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if done(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the spans expected did not arrive within {timeout:g}s; got: "
                    f"{sorted(span.name for span in spans)}"
                )
            time.sleep(0.05)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if sink.keep and sink.status == 200:
                    with sink._lock:
                        sink.bodies.append(({k.lower(): v for k, v in self.headers.items()}, body))
                sink.received += 1
                self.send_response(sink.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler


if __name__ == "__main__":
    server = OtlpSink(keep=False)
    print(server.port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
