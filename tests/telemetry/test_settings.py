"""Where traces go and what they carry (engine/telemetry/settings.py): blockyard.yaml's `telemetry:` and
the OTEL_* variables, the environment winning; a caller's W3C traceparent (engine/telemetry/traceparent.py);
the setting checked at file:line:col; validation never loading OpenTelemetry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.spec.config import TelemetrySpec
from engine.telemetry import start, traceparent
from engine.telemetry.settings import Batching, parse_pairs, resolve
from tests.support.cli import Cli

REPO = Path(__file__).resolve().parents[2]
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_off_unless_the_yard_or_the_environment_asks() -> None:
    assert resolve(None, {}) is None
    assert start(None, {}) is None
    on = resolve(TelemetrySpec(), {})
    assert on is not None and on.endpoint == "http://localhost:4318/v1/traces"  # a local collector
    assert on.service_name == "blockyard" and not on.capture_content
    by_env = resolve(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert by_env is not None and by_env.endpoint == "http://collector:4318/v1/traces"


def test_the_environment_wins_over_the_yard() -> None:
    spec = TelemetrySpec(
        endpoint="http://localhost:6006",
        service_name="yard-name",
        capture_content=True,
        headers={"x-team": "data"},
    )
    yard = resolve(spec, {})
    assert yard is not None
    assert yard.endpoint == "http://localhost:6006/v1/traces" and yard.service_name == "yard-name"
    assert yard.capture_content and yard.header_map() == {"x-team": "data"}
    assert dict(yard.resource)["openinference.project.name"] == "yard-name"  # Phoenix's project
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318",
        "OTEL_SERVICE_NAME": "env-name",
        "OTEL_EXPORTER_OTLP_HEADERS": "X-Team=ops,authorization=Bearer%20abc",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=ignored-for-OTEL_SERVICE_NAME",
    }
    settings = resolve(spec, env)
    assert settings is not None
    assert settings.endpoint == "http://base:4318/v1/traces"
    assert settings.service_name == "env-name" and not settings.capture_content
    assert settings.header_map() == {"x-team": "ops", "authorization": "Bearer abc"}
    assert dict(settings.resource) == {
        "deployment.environment": "prod",
        "openinference.project.name": "env-name",
    }
    # the traces endpoint is taken as it is; the per-signal headers win over the general ones
    exact = resolve(
        spec,
        {
            **env,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/custom",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=traces",
        },
    )
    assert (
        exact is not None
        and exact.endpoint == "http://t:9/custom"
        and exact.header_map()["x-team"] == "traces"
    )
    # a URL that names the traces path already is not given it twice
    full = resolve(TelemetrySpec(endpoint="https://otlp.example.com/v1/traces"), {})
    assert full is not None and full.endpoint == "https://otlp.example.com/v1/traces"


def test_off_switches_of_the_environment() -> None:
    spec = TelemetrySpec(endpoint="http://localhost:6006")
    assert resolve(spec, {"OTEL_SDK_DISABLED": "true"}) is None
    assert resolve(spec, {"OTEL_TRACES_EXPORTER": "none"}) is None
    assert resolve(spec, {"OTEL_SDK_DISABLED": "false"}) is not None


def test_secret_headers_come_from_the_environment_only() -> None:
    spec = TelemetrySpec(headers_env={"Authorization": "OTLP_AUTH", "x-api-key": "MISSING_KEY"})
    settings = resolve(spec, {"OTLP_AUTH": "Bearer s3cret"})
    assert settings is not None
    assert settings.header_map() == {"authorization": "Bearer s3cret"}
    assert len(settings.problems) == 1 and "MISSING_KEY" in settings.problems[0]
    assert "s3cret" not in repr(spec)  # the yard names the variable, never the value
    grpc = resolve(
        spec, {"OTLP_AUTH": "x", "MISSING_KEY": "y", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    )
    assert grpc is not None and any("grpc" in problem for problem in grpc.problems)


def test_the_batching_variables_of_the_sdk_are_read() -> None:
    """OTEL_BSP_* as the SDK's BatchSpanProcessor reads them (engine/telemetry/batch.py does its work)."""
    spec = TelemetrySpec()
    default = resolve(spec, {})
    assert default is not None and default.batching == Batching(
        delay=5.0, max_batch=512, max_queue=2048
    )
    assert default.problems == ()
    tuned = resolve(
        spec,
        {
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64",
            "OTEL_BSP_MAX_QUEUE_SIZE": "100",
        },
    )
    assert tuned is not None and tuned.batching == Batching(delay=0.05, max_batch=64, max_queue=100)
    assert tuned.problems == ()
    wrong = resolve(spec, {"OTEL_BSP_SCHEDULE_DELAY": "soon", "OTEL_BSP_MAX_QUEUE_SIZE": "-1"})
    assert wrong is not None and wrong.batching == Batching()  # the defaults, each mistake said
    assert wrong.problems == (
        "OTEL_BSP_SCHEDULE_DELAY='soon' is not a positive integer: 5000 is used",
        "OTEL_BSP_MAX_QUEUE_SIZE='-1' is not a positive integer: 2048 is used",
    )
    small = resolve(spec, {"OTEL_BSP_MAX_QUEUE_SIZE": "10"})  # the batches are as small, unsaid
    assert (
        small is not None
        and small.batching == Batching(max_batch=10, max_queue=10)
        and small.problems == ()
    )
    larger = resolve(
        spec, {"OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20"}
    )
    assert larger is not None and larger.batching.max_batch == 10
    assert larger.problems == (
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=20 is more than OTEL_BSP_MAX_QUEUE_SIZE=10: "
        "batches of 10 are sent",
    )


def test_pairs_are_percent_decoded_and_malformed_pieces_skipped() -> None:
    assert parse_pairs("a=1, b = two%2Cthree ,broken,=x,c=") == {
        "a": "1",
        "b": "two,three",
        "c": "",
    }


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (PARENT, (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, True)),
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, False),
        ),
        # a later version may add fields: what version 00 defines is read
        (
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",
            (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, True),
        ),
    ],
)
def test_a_valid_traceparent(header: str, expected: tuple[int, int, bool]) -> None:
    parent = traceparent.parse(header)
    assert parent is not None and (parent.trace_id, parent.span_id, parent.sampled) == expected
    assert traceparent.parse(parent.header()) == parent


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        PARENT.upper(),
        PARENT + "-extra",  # version 00 has exactly four fields
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # an all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # an all-zero parent id
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # too short
        "00-" + "a" * 600,
    ],
)
def test_an_invalid_traceparent_is_ignored(header: str | None) -> None:
    assert traceparent.parse(header) is None
    assert traceparent.valid(header) is None


def test_a_mistake_under_telemetry_is_reported_where_it_is_written(
    cli: Cli, tmp_path: Path
) -> None:
    root = tmp_path / "yard"
    (root / "flows").mkdir(parents=True)
    (root / "blocks").mkdir()
    (root / "blockyard.yaml").write_text(
        "telemetry:\n  endpoint: http://localhost:6006\n  capture_contnt: true\n"
        "  headers_env: {Authorization: not a variable}\n",
        encoding="utf-8",
    )
    outcome = cli(root, "validate")
    assert outcome.code != 0
    said = outcome.out + outcome.err
    assert "blockyard.yaml:3:3" in said and "capture_contnt" in said, said
    assert "blockyard.yaml:4:" in said, said  # the variable's name breaks its pattern


def test_validating_a_yard_with_telemetry_never_loads_opentelemetry(tmp_path: Path) -> None:
    """`blockyard validate` (the pre-commit path) reads the setting and nothing of OpenTelemetry."""
    root = tmp_path / "yard"
    (root / "flows").mkdir(parents=True)
    (root / "blocks").mkdir()
    (root / "blockyard.yaml").write_text(
        "telemetry: {endpoint: 'http://localhost:6006', capture_content: true}\n", encoding="utf-8"
    )
    (root / "blocks/note.yaml").write_text(
        "block: note\ndescription: A note.\nkind: transform\n"
        "outputs:\n  note: {type: string}\ncompute:\n  note: \"'x'\"\n"
    )
    (root / "flows/noted.yaml").write_text("flow: noted\nsteps:\n  - id: noted\n    uses: note\n")
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
    }
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "engine", "validate", "--root", str(root)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    modules = {
        line.rsplit("|", 1)[-1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "engine.spec.config" in modules
    assert sorted(m for m in modules if m.startswith(("opentelemetry", "engine.telemetry"))) == []
