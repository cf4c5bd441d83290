"""Traces over real OTLP/HTTP to a loopback receiver (tests/support/otlp_sink.py, decoding with the
official protobuf classes): `blockyard run` as configured by blockyard.yaml or the OTEL_* variables, with
the secret header from the environment; a server's runs continuing the caller's W3C traceparent on every
route that starts or resumes one; no SDK, or a destination that is down: one warning, the runs go on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine import Yard
from engine.spec.config import TelemetrySpec
from engine.telemetry import exporter
from engine.telemetry.settings import resolve
from tests.serve.serve_helpers import Live, start_live
from tests.support import processes
from tests.support.cli import Cli
from tests.support.example import copy_example_yard
from tests.support.loopback import LOOPBACK
from tests.support.otlp_sink import OtlpSink, SpanRecord

REPO = Path(__file__).resolve().parents[2]
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
PARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as receiver:
        yield receiver


@pytest.fixture
def example(tmp_path: Path) -> Path:
    return copy_example_yard(tmp_path / "yard")


def _roots(spans: list[SpanRecord], flow: str) -> list[SpanRecord]:
    return [span for span in spans if span.name == f"invoke_workflow {flow}"]


def test_blockyard_run_sends_its_spans_as_the_yard_says(
    example: Path, sink: OtlpSink, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = example / "blockyard.yaml"
    config.write_text(
        config.read_text(encoding="utf-8")
        + (
            f"telemetry:\n  endpoint: {sink.base_url}\n  service_name: yard-tests\n"
            "  headers: {x-team: tests}\n  headers_env: {authorization: TEST_OTLP_TOKEN}\n"
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("TEST_OTLP_TOKEN", "Bearer t0ken")
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SERVICE_NAME",
    ):
        monkeypatch.delenv(name, raising=False)
    outcome = cli(example, "run", "hello", "--input", "name=Ada")
    assert outcome.code == 0, outcome.err
    # Yard.close() flushed them: they are there when the command returns
    spans = sink.spans()
    (root,) = _roots(spans, "hello")
    assert sorted(span.name for span in spans) == [
        "chat mock",
        "invoke_workflow hello",
        "step greet",
        "step shout",
    ]
    assert root.resource["service.name"] == "yard-tests"
    assert root.resource["openinference.project.name"] == "yard-tests"
    assert root.scope[0] == "blockyard"
    assert {span.trace_id for span in spans} == {root.trace_id}
    (headers,) = {(h["authorization"], h["x-team"], h["content-type"]) for h in sink.headers()}
    assert headers == ("Bearer t0ken", "tests", "application/x-protobuf")
    assert "t0ken" not in (example / "blockyard.yaml").read_text(encoding="utf-8")


@pytest.fixture
def served(example: Path, sink: OtlpSink, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    """`blockyard serve`'s server (in this process) tracing to the sink, as OTEL_* configure it."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.base_url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # spans leave within 50 ms, not 5 s
    from engine.serve.server import Settings

    live = start_live(Settings(root=example, grace=5.0, poll=0.1, schedules=False, watch=False))
    yield live
    live.stop()


def test_each_route_that_starts_or_resumes_a_run_continues_the_callers_trace(
    served: Live, sink: OtlpSink
) -> None:
    caller = {"traceparent": PARENT}
    with served.client() as client:
        started = client.post(
            "/flows/hello/runs", json={"inputs": {"name": "Ada"}}, headers=caller
        ).json()
        gated = client.post("/flows/order_lunch/runs", json={"inputs": {"user_id": "ada"}}).json()
        assert gated["status"] == "waiting", gated
        resumed = client.post(
            f"/runs/{gated['run_id']}/resume",
            headers=caller,
            json={"decision": "approve", "values": {"restaurant": "Chipotle"}},
        ).json()
        assert resumed["status"] == "waiting", resumed
        assert (
            client.post("/threads", json={"id": "t-1", "flow": "support_chat"}).status_code == 201
        )
        turn = client.post(
            "/threads/t-1/runs", json={"inputs": {"message": "hi"}}, headers=caller
        ).json()
        assert turn["status"] == "finished", turn
        lg = client.post(
            "/lg/runs/wait",
            json={"assistant_id": "hello", "input": {"name": "Lee"}},
            headers=caller,
        )
        assert lg.status_code == 200, lg.text
        plain = client.post(
            "/flows/hello/runs", json={"inputs": {}}, headers={"traceparent": "not-a-trace"}
        ).json()
    spans = sink.wait_for(
        lambda got: (
            len(_roots(got, "hello")) == 3
            and len(_roots(got, "order_lunch")) == 2
            and len(_roots(got, "support_chat")) == 1
        )
    )
    by_run = {
        (
            span.attributes["blockyard.run_id"],
            span.attributes.get("blockyard.run.resumed", False),
        ): span
        for span in spans
        if span.name.startswith("invoke_workflow ")
    }
    continued = [
        by_run[(started["run_id"], False)],
        by_run[(gated["run_id"], True)],
        by_run[(turn["run_id"], False)],
    ]
    continued += [
        span
        for span in _roots(spans, "hello")
        if span.attributes["blockyard.run_id"] not in (started["run_id"], plain["run_id"])
    ]  # the LangGraph API's run
    assert len(continued) == 4
    for root in continued:
        assert (root.trace_id, root.parent_id) == (CALLER_TRACE, CALLER_SPAN), root.name
        assert root.flags & 0x200  # its parent is remote
    first_gate = by_run[(gated["run_id"], False)]
    assert first_gate.trace_id != CALLER_TRACE and first_gate.parent_id is None
    ignored = by_run[
        (plain["run_id"], False)
    ]  # an invalid traceparent is ignored: a trace of its own
    assert ignored.trace_id != CALLER_TRACE and ignored.parent_id is None


def test_spans_leave_on_their_own_after_the_schedule_delay(
    example: Path, sink: OtlpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a flush (a server between runs): the batch's thread sends after OTEL_BSP_SCHEDULE_DELAY."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    settings = resolve(TelemetrySpec(endpoint=sink.base_url), os.environ)
    assert settings is not None and settings.batching.delay == 0.1
    pipeline = exporter.Pipeline(settings)
    try:
        with Yard.load(example) as yard:
            yard.engine.observers[:] = [pipeline.observer]
            assert yard.run("hello", {"name": "Ada"}).ok
            spans = sink.wait_for(lambda got: len(got) == 4)
    finally:
        pipeline.shutdown()
    assert sorted(span.name for span in spans) == [
        "chat mock",
        "invoke_workflow hello",
        "step greet",
        "step shout",
    ]


def test_without_the_sdk_one_warning_and_the_run_goes_on(example: Path, sink: OtlpSink) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OTEL_EXPORTER_OTLP_ENDPOINT": sink.base_url}
    code = (
        "import sys; sys.modules['opentelemetry'] = None  # as if the otel extra were not installed\n"
        "from engine.cli import main\n"
        f"sys.exit(main(['run', 'hello', '--root', {str(example)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if "telemetry" in line]
    assert len(warnings) == 1, done.stderr
    assert "the otel extra is not installed: pip install" in warnings[0]
    assert sink.received == 0


def test_a_destination_that_is_down_costs_one_warning_not_the_command(example: Path) -> None:
    with OtlpSink() as gone:
        url = gone.base_url  # a port that was ours, closed now: connections are refused
    env = {**os.environ, "PYTHONPATH": str(REPO), "OTEL_EXPORTER_OTLP_ENDPOINT": url}
    began = time.monotonic()
    done = processes.run(
        [sys.executable, "-m", "engine", "run", "hello", "--root", str(example)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if "telemetry" in line]
    assert len(warnings) == 1 and "could not be sent" in warnings[0], done.stderr
    assert took < 60


def test_a_destination_refusing_spans_is_said_once(
    example: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # said at most once a minute: no earlier warning counts
    monkeypatch.setattr(exporter._warnings, "last", 0.0)
    with OtlpSink(status=400) as refusing:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", refusing.base_url)
        with caplog.at_level("WARNING", logger="blockyard.telemetry"):
            outcome = cli(example, "run", "hello")
        assert outcome.code == 0
        assert refusing.received == 1  # a client error is not retried
    said = [
        record.getMessage() for record in caplog.records if record.name == "blockyard.telemetry"
    ]
    assert len(said) == 1 and "HTTP 400" in said[0], said


def test_a_browser_page_may_send_its_traceparent(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A web page instrumented with OpenTelemetry sends traceparent on its calls: CORS lets it (an origin
    of `server.cors_origins` asks in its preflight)."""
    from engine.serve.server import Settings

    config = example / "blockyard.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + "server:\n  cors_origins: ['http://localhost:3000']\n",
        encoding="utf-8",
    )
    live = start_live(Settings(root=example, grace=5.0, poll=0.1, schedules=False, watch=False))
    try:
        response = httpx.options(
            f"{live.url}/flows/hello/runs",
            verify=LOOPBACK,
            headers={
                "Origin": "http://localhost:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,traceparent,tracestate",
            },
        )
    finally:
        live.stop()
    assert response.status_code == 200, response.text
    allowed = response.headers["access-control-allow-headers"].lower()
    assert "traceparent" in allowed and "tracestate" in allowed
