"""Where traces go and what they carry: blockyard.yaml's `telemetry:` and the standard OTEL_* environment
variables, resolved into one `Settings` (docs/observability.md, "OpenTelemetry traces").

The environment wins over the yard, as the OpenTelemetry specification has it: a deployment points the
same yard at its own collector without editing it. Secrets come from the environment only
(`headers_env` names variables; OTEL_EXPORTER_OTLP_HEADERS). Only the standard library: a yard whose
telemetry is off (or whose SDK is missing) never loads OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from engine.spec.config import TelemetrySpec

DEFAULT_ENDPOINT = (
    "http://localhost:4318"  # the OTLP/HTTP port of a local collector (the OTel default)
)
TRACES_PATH = "/v1/traces"
DEFAULT_SERVICE = "blockyard"
# Phoenix files spans under the project this resource attribute names (else "default")
PROJECT_ATTRIBUTE = "openinference.project.name"

DISABLED = "OTEL_SDK_DISABLED"
EXPORTER = "OTEL_TRACES_EXPORTER"
ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
TRACES_HEADERS = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
COMPRESSION = "OTEL_EXPORTER_OTLP_COMPRESSION"
TRACES_COMPRESSION = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
SERVICE_NAME = "OTEL_SERVICE_NAME"
RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# the batching, named and defaulted as the SDK's BatchSpanProcessor has it (engine/telemetry/batch.py)
SCHEDULE_DELAY = "OTEL_BSP_SCHEDULE_DELAY"  # milliseconds
MAX_QUEUE = "OTEL_BSP_MAX_QUEUE_SIZE"
MAX_BATCH = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
TRUE = ("true", "1", "yes", "on")


@dataclass(frozen=True)
class Batching:
    """When queued spans leave: every `delay` seconds, or as soon as `max_batch` wait; at most `max_queue` wait."""

    delay: float = 5.0
    max_batch: int = 512
    max_queue: int = 2048


@dataclass(frozen=True)
class Settings:
    """One export destination and what goes there. Hashable: processes share one pipeline per settings."""

    endpoint: str  # the full traces URL, .../v1/traces
    headers: tuple[tuple[str, str], ...] = ()
    service_name: str = DEFAULT_SERVICE
    capture_content: bool = False
    resource: tuple[tuple[str, str], ...] = ()  # resource attributes besides service.name
    gzip: bool = False
    batching: Batching = Batching()
    problems: tuple[
        str, ...
    ] = ()  # what was set wrong, said once as a warning (a variable missing)

    def header_map(self) -> dict[str, str]:
        return dict(self.headers)


def resolve(spec: TelemetrySpec | None, env: Mapping[str, str]) -> Settings | None:
    """The settings of a yard whose blockyard.yaml says `spec` under `telemetry:`, in environment `env`;
    None when traces are off: neither the yard nor OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT asks for them,
    or OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none turns them off."""
    if env.get(DISABLED, "").strip().lower() in TRUE:
        return None
    if env.get(EXPORTER, "").strip().lower() == "none":
        return None
    from_env = bool(env.get(TRACES_ENDPOINT, "").strip() or env.get(ENDPOINT, "").strip())
    if spec is None and not from_env:
        return None
    spec = spec or TelemetrySpec()
    problems: list[str] = []
    headers: dict[str, str] = {name.lower(): value for name, value in spec.headers.items()}
    for name, variable in spec.headers_env.items():
        value = env.get(variable)
        if value:
            headers[name.lower()] = value
        else:
            problems.append(
                f"header '{name}' is sent without a value: the environment variable {variable} "
                "(telemetry.headers_env) is not set"
            )
    headers.update(parse_pairs(env.get(HEADERS, "")))
    headers.update(parse_pairs(env.get(TRACES_HEADERS, "")))
    protocol = (env.get(TRACES_PROTOCOL) or env.get(PROTOCOL) or "").strip().lower()
    if protocol and protocol != "http/protobuf":
        problems.append(
            f"OTLP protocol '{protocol}' is not supported: traces are sent as http/protobuf"
        )
    resource = parse_pairs(env.get(RESOURCE_ATTRIBUTES, ""), lower=False)
    service = (
        env.get(SERVICE_NAME, "").strip()
        or resource.pop("service.name", "").strip()
        or spec.service_name
    )
    resource.pop("service.name", None)
    resource.setdefault(PROJECT_ATTRIBUTE, service)
    capture = env.get(CAPTURE_CONTENT, "").strip().lower()
    compression = (env.get(TRACES_COMPRESSION) or env.get(COMPRESSION) or "").strip().lower()
    return Settings(
        endpoint=traces_url(env, spec.endpoint),
        headers=tuple(sorted(headers.items())),
        service_name=service,
        capture_content=capture in TRUE if capture else spec.capture_content,
        resource=tuple(sorted(resource.items())),
        gzip=compression == "gzip",
        batching=batching(env, problems),
        problems=tuple(problems),
    )


def batching(env: Mapping[str, str], problems: list[str]) -> Batching:
    """The OTEL_BSP_* numbers of `env`; one that is not a positive integer is said (in `problems`) and
    the default used, as the SDK does."""
    default = Batching()

    def number(variable: str, fallback: int) -> int:
        raw = env.get(variable, "").strip()
        if not raw:
            return fallback
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            problems.append(f"{variable}={raw!r} is not a positive integer: {fallback} is used")
            return fallback
        return value

    delay = number(SCHEDULE_DELAY, int(default.delay * 1000)) / 1000
    queue = number(MAX_QUEUE, default.max_queue)
    batch = number(MAX_BATCH, default.max_batch)
    if batch > queue:
        # a small queue set alone makes the batches as small; a batch set larger is said
        if env.get(MAX_BATCH, "").strip():
            problems.append(
                f"{MAX_BATCH}={batch} is more than {MAX_QUEUE}={queue}: batches of {queue} are sent"
            )
        batch = queue
    return Batching(delay=delay, max_batch=batch, max_queue=queue)


def traces_url(env: Mapping[str, str], configured: str | None) -> str:
    """The URL spans are posted to: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is; else a base URL
    (OTEL_EXPORTER_OTLP_ENDPOINT, then the yard's `endpoint`, then the local collector's) with /v1/traces."""
    exact = env.get(TRACES_ENDPOINT, "").strip()
    if exact:
        return exact
    base = env.get(ENDPOINT, "").strip() or configured or DEFAULT_ENDPOINT
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def parse_pairs(text: str, *, lower: bool = True) -> dict[str, str]:
    """`key1=value1,key2=value2` (the W3C Baggage form of OTEL_EXPORTER_OTLP_HEADERS and
    OTEL_RESOURCE_ATTRIBUTES): values percent-decoded; pieces without `=` are skipped, as the SDK does."""
    found: dict[str, str] = {}
    for piece in text.split(","):
        key, equals, value = piece.partition("=")
        key = key.strip()
        if not equals or not key:
            continue
        found[key.lower() if lower else key] = unquote(value.strip())
    return found
