"""blockyard.yaml: model profiles, tools, paths, server settings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from engine.core.values import JsonDict
from engine.spec.budget import BudgetSpec
from engine.spec.common import (
    Durability,
    Duration,
    ModelProfile,
    Name,
    Spec,
    Synchronous,
    empty_dict,
    empty_list,
)

# A Postgres URL (libpq's URI form); the password in it is never shown (engine/state/location.py)
DatabaseUrl = Annotated[str, StringConstraints(pattern=r"^postgres(ql)?://")]


class ToolDecl(Spec):
    """A Python tool declared by import path; loaded only from the yard's code or installed packages."""

    import_: str = Field(
        ...,
        alias="import",
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="module:function",
    )
    description: str | None = Field(None, description="What the tool does (shown to models).")
    parameters: JsonDict | None = Field(
        None, description="JSON Schema of the arguments (default: derived from the type hints)."
    )


class McpServerSpec(Spec):
    """An MCP server whose tools the yard's agents may call (needs the `mcp` extra)."""

    command: str | None = Field(
        None, description="stdio transport: the program that runs the server."
    )
    args: list[str] = Field(
        default_factory=empty_list, description="stdio transport: its arguments."
    )
    env: dict[str, str] = Field(
        default_factory=empty_dict, description="stdio transport: extra environment variables."
    )
    url: str | None = Field(None, description="HTTP transports: the server's URL.")
    transport: Literal["stdio", "streamable_http", "sse"] | None = Field(
        None, description="stdio when `command` is set, else streamable_http."
    )
    tools: list[Name] = Field(
        ..., min_length=1, description="The server's tools the yard may use (an allow-list)."
    )
    timeout: str = Field(
        "30s", pattern=r"^[0-9]+(\.[0-9]+)?(ms|s|m)$", description="Limit of one tool call."
    )


class PathsSpec(Spec):
    """Where things are, relative to the yard root."""

    blocks: str = Field("blocks", description="Folder of block files.")
    flows: str = Field("flows", description="Folder of flow files.")
    state: str = Field(
        ".blockyard/state.db",
        description=(
            "SQLite database of runs, checkpoints and memory (unless `database` names a Postgres server)."
        ),
    )
    code: str = Field(".", description="Folder added to the import path for the yard's own tools.")


class HttpSpec(Spec):
    """Limits of the built-in http_request tool."""

    allowed_hosts: list[str] = Field(
        default_factory=empty_list, description="Hosts the tool may reach."
    )
    timeout: str = Field("10s", pattern=r"^[0-9]+(\.[0-9]+)?(ms|s|m)$", description="Per request.")
    max_bytes: int = Field(1_000_000, ge=1, description="Largest response body read.")


# A Host header value: a name or IPv4 address, or a bracketed IPv6 address, with an optional port; or `*`.
# A URL path prefix of one or more segments (docs/langgraph-api.md); its first one must not be one of the server's own.
LANGGRAPH_PREFIX_PATTERN = r"^(/[A-Za-z0-9_~-][A-Za-z0-9_.~-]*)+$"
SERVER_PATHS = frozenset(
    {
        "flows",
        "runs",
        "threads",
        "plans",
        "static",
        "docs",
        "openapi.json",
        "healthz",
        "diagnostics",
        "favicon.ico",
    }
)
HOST_PATTERN = r"^(\*|[A-Za-z0-9_.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?)$"
# A web origin as browsers send it in `Origin`: scheme, host (name, IPv4 or bracketed IPv6), optional port; no path.
ORIGIN_PATTERN = r"^https?://([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$"


class WebhooksSpec(Spec):
    """The POSTs `blockyard serve` sends to a run's `webhook` when it waits at a gate or ends (docs/serve.md)."""

    secret_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = (
        Field(
            None,
            description="The environment variable holding the secret that signs every POST (HMAC-SHA256 in "
            "X-Blockyard-Signature); unset: unsigned. Named but not set: nothing is sent.",
        )
    )
    attempts: int = Field(
        4,
        ge=1,
        le=10,
        description=(
            "Attempts of one POST in all: a connection error, a timeout or a 5xx is retried with exponential "
            "backoff (0.5 s, 1 s, 2 s, ...)."
        ),
    )
    timeout: str = Field(
        "10s", pattern=r"^[0-9]+(\.[0-9]+)?(ms|s|m)$", description="Limit of one attempt."
    )


NotifyWhen = Literal["waiting", "ended"]
NOTIFY_WHEN: tuple[NotifyWhen, ...] = ("waiting", "ended")


class NotifySpec(Spec):
    """Where `blockyard serve` posts the runs of the yard's flows when they wait at a gate or end, whoever
    started them (docs/serve.md, "Webhooks"): signed, retried and logged as a run's own `webhook` is."""

    url: str = Field(
        ...,
        max_length=2048,
        description="An http:// or https:// URL on a host `http.allowed_hosts` allows (`validate` checks it).",
    )
    flows: list[Name] | None = Field(
        None, description="The flows whose runs it is told about; unset: every flow of the yard."
    )
    on: list[NotifyWhen] = Field(
        default_factory=lambda: list(NOTIFY_WHEN),
        min_length=1,
        description="When: a run waiting at an approval gate (`run.waiting`), a run that ended (`run.ended`).",
    )


class ServerSpec(Spec):
    """Defaults of `blockyard serve`."""

    host: str = Field(
        "127.0.0.1", description="Address to bind; anything but loopback needs BLOCKYARD_TOKEN."
    )
    port: int = Field(8000, ge=1, le=65535, description="Port to bind.")
    max_concurrent_runs: int = Field(32, ge=1, description="Runs executing at once; others queue.")
    max_concurrent_runs_global: int | None = Field(
        None,
        ge=1,
        description="Runs executing at once across every server sharing the state database (replicas on one "
        "Postgres database, or servers on one SQLite file); others wait queued in the database and "
        "start when a slot frees on any server. Null: no limit but each server's "
        "max_concurrent_runs. See docs/postgres.md.",
    )
    allowed_hosts: list[Annotated[str, StringConstraints(pattern=HOST_PATTERN)]] = Field(
        default_factory=empty_list,
        description="Host header values the server answers besides its own loopback names (`name`: any port, "
        "`name:port`: that port; `*`: any host, e.g. behind a proxy). See docs/serve.md.",
    )
    max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1, description="Largest request body; larger ones get 413."
    )
    max_input_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Largest inputs of one run (or values of one resume), measured as UTF-8 JSON; larger get 413.",
    )
    langgraph_prefix: Annotated[str, StringConstraints(pattern=LANGGRAPH_PREFIX_PATTERN)] | None = (
        Field(
            "/lg",
            description="Path under which the server also speaks the LangGraph Server API, for langgraph-sdk "
            "clients and chat UIs (docs/langgraph-api.md); null turns it off.",
        )
    )
    cors_origins: list[Annotated[str, StringConstraints(pattern=ORIGIN_PATTERN)]] = Field(
        default_factory=empty_list,
        description="Web origins (`http://localhost:3000`: scheme, host, port; no path, no `*`) whose pages may call "
        "the server from the browser, such as a chat UI (CORS); empty: no CORS headers. Their calls "
        "still need the token. See docs/serve.md.",
    )

    mcp_flows: list[Name] | None = Field(
        None,
        description="The flows `/mcp` and `blockyard mcp` offer as tools (docs/mcp.md); unset: every flow of the "
        "yard. A flow left out is neither listed nor callable over MCP.",
    )
    webhooks: WebhooksSpec = Field(
        default_factory=WebhooksSpec,
        description=(
            "How runs' webhooks are signed and retried; their hosts must be in `http.allowed_hosts`."
        ),
    )
    api_crons: bool = Field(
        True,
        description="Whether clients may create crons over the LangGraph API (`POST /runs/crons`); false: every "
        "schedule is a flow's `schedule:`, reviewed in Git, and creating one is a 403 (crons made before "
        "still fire until deleted). See docs/langgraph-api.md.",
    )
    lease_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="How long a replica's lease on the runs it executes lasts without a heartbeat (sent every "
        "third of it): once it runs out (the replica died), another replica sharing the database "
        "takes the runs over from their last checkpoint. See docs/postgres.md.",
    )

    @field_validator("cors_origins")
    @classmethod
    def _lower_case_origins(cls, origins: list[str]) -> list[str]:
        return [
            origin.lower() for origin in origins
        ]  # browsers send the scheme and host lower-case

    @field_validator("langgraph_prefix")
    @classmethod
    def _own_prefix(cls, prefix: str | None) -> str | None:
        if prefix is not None and prefix.split("/")[1] in SERVER_PATHS:
            raise ValueError(
                f"'{prefix}' starts with a path of the server's own API; pick another, e.g. /lg"
            )
        return prefix


class LimitsSpec(Spec):
    """Bounds on what templates and expressions may compute (docs/flows.md, "Limits of templates")."""

    template_max_string: int = Field(
        1_000_000,
        ge=1,
        le=100_000_000,
        description=(
            "Most characters a string a template creates may have; also bounds the text of a rendered template and "
            "the size (as text) of any list or object a template builds."
        ),
    )
    template_max_items: int = Field(
        100_000,
        ge=1,
        le=10_000_000,
        description=(
            "Most items a list or object a template creates may have, and the longest range()."
        ),
    )
    template_max_int_bits: int = Field(
        64,
        ge=64,
        le=100_000,
        description=(
            "Most bits an integer a template computes may have (a result stored in the run must fit 64 bits)."
        ),
    )
    template_max_iterations: int = Field(
        1_000_000,
        ge=1,
        le=100_000_000,
        description=(
            "Most steps one template or expression may take: loop iterations, calls, and the items filters "
            "such as map or sort go through."
        ),
    )
    template_timeout: Duration = Field(
        "5s", description="Longest one template or expression may take (at most 1h)."
    )


class ThreadsSpec(Spec):
    """Conversation threads (docs/memory.md): what their models are sent, and how threads are named."""

    history_chars: int = Field(
        100_000,
        ge=0,
        le=100_000_000,
        description=(
            "Most characters of earlier conversation one model call is sent; the oldest turns are dropped first "
            "(with a `warning` event). The checkpoint keeps no more than this either; the messages table keeps all."
        ),
    )
    name_model: Name | None = Field(
        None,
        description=(
            "Model profile that names a thread on its first turn (five words at most); without one, a thread is "
            "named by the first five words of its first message."
        ),
    )


Provider = Literal["openai", "azure", "anthropic", "google", "mock"]


class RetentionSpec(Spec):
    """How long the state database keeps runs that ended: `blockyard gc` deletes what is older, and
    `blockyard serve` runs it daily (docs/runtime.md, "Retention"). Unset settings keep forever. Runs
    waiting for an approval, running runs and the turns of conversation threads are never deleted."""

    traces: Duration | None = Field(
        None,
        description=(
            "Finished runs older than this (by when they finished) lose their event trace and checkpoint; "
            "their row stays in `blockyard runs` with status, inputs and outputs."
        ),
    )
    runs: Duration | None = Field(
        None,
        description=(
            "Finished runs older than this are deleted: their row, trace, checkpoint and gates."
        ),
    )
    failed: Duration | None = Field(
        None,
        description=(
            "Failed and interrupted runs older than this (by when they stopped) are deleted too; until then "
            "they can be resumed."
        ),
    )
    max_runs: int | None = Field(
        None,
        ge=1,
        description=(
            "Most finished runs kept, whatever their age: the oldest beyond it are deleted."
        ),
    )


class ModelPolicy(Spec):
    """Which models the yard's blocks may run on."""

    providers: list[Provider] | None = Field(
        None,
        description="Providers a model profile (in `models:` or inline in a block) may name; unset: any.",
    )
    names: list[str] | None = Field(
        None,
        description="Model names a profile may ask for: exact names or shell-style patterns such as "
        "`gpt-4o*`; unset: any.",
    )


class PolicySpec(Spec):
    """Rules of the yard that `blockyard validate` enforces on every flow and block (docs/review.md)."""

    models: ModelPolicy = Field(
        default_factory=ModelPolicy, description="Allowed providers and model names."
    )
    max_agent_iterations: int | None = Field(
        None,
        ge=1,
        description="Most turns an agent block may take (`max_iterations`; an agent without it "
        "takes the default, 10).",
    )
    max_loop_iterations: int | None = Field(
        None,
        ge=1,
        description="Most iterations a loop may run (`loop.max_iterations`) and most visits a step "
        "may allow (`max_visits`).",
    )
    approval_before_tools: list[Name] = Field(
        default_factory=empty_list,
        description="Tools (e.g. write_file, http_request) that a step may only run behind "
        "an approval gate: `require_approval:` on the step, or an `approval:` "
        "step right before it.",
    )
    gate_timeout: bool = Field(False, description="Every approval gate must have a `timeout:`.")
    http_hosts: list[str] | None = Field(
        None,
        description="The hosts http_request may ever reach: `http.allowed_hosts` and literal URLs bound to "
        "http_request tool blocks must stay within them; unset: any.",
    )
    require_budget: bool = Field(
        False,
        description=(
            "Every flow must have a budget: its own `budget:` or blockyard.yaml's (docs/observability.md)."
        ),
    )


# An HTTP header's name (RFC 9110 token) and an environment variable's name
HEADER_NAME_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class TelemetrySpec(Spec):
    """OpenTelemetry traces of runs, sent over OTLP/HTTP (docs/observability.md, "OpenTelemetry traces");
    needs the `otel` extra. The standard OTEL_* environment variables win over these settings."""

    endpoint: Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$")] | None = Field(
        None,
        description=(
            "Where traces go: an OTLP/HTTP base URL such as http://localhost:6006 (Phoenix) or "
            "http://localhost:4318 (a collector), to which /v1/traces is added (a URL ending in /v1/traces is used as "
            "it is). Unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else "
            "http://localhost:4318."
        ),
    )
    headers: dict[
        Annotated[str, StringConstraints(pattern=HEADER_NAME_PATTERN)],
        Annotated[str, StringConstraints(pattern=r"^[^\r\n]*$")],
    ] = Field(
        default_factory=empty_dict,
        description=(
            "HTTP headers sent with every export that are no secret (a tenant, a project); a secret goes in "
            "`headers_env`, never here."
        ),
    )
    headers_env: dict[
        Annotated[str, StringConstraints(pattern=HEADER_NAME_PATTERN)],
        Annotated[str, StringConstraints(pattern=ENV_NAME_PATTERN)],
    ] = Field(
        default_factory=empty_dict,
        description=(
            "HTTP headers whose values come from environment variables: header name -> the name of the variable "
            "(`authorization: OTLP_AUTH`), so that a token never sits in the yard."
        ),
    )
    service_name: str = Field(
        "blockyard",
        min_length=1,
        max_length=200,
        description=(
            "The service.name of the traces (and Phoenix's project); OTEL_SERVICE_NAME wins."
        ),
    )
    capture_content: bool = Field(
        False,
        description=(
            "Also record what runs read and write on their spans: inputs and outputs of runs and steps, tool "
            "arguments and results. Off by default: traces then carry names, timings, tokens and costs, no content."
        ),
    )


class ConfigSpec(Spec):
    """The optional project file blockyard.yaml."""

    models: dict[Name, ModelProfile] = Field(
        default_factory=empty_dict,
        description="Model profiles by name; `default` is used when a block names none.",
    )
    tools: dict[Name, ToolDecl] = Field(
        default_factory=empty_dict, description="Python tools by name."
    )
    mcp: dict[Name, McpServerSpec] = Field(
        default_factory=empty_dict,
        description="MCP servers by name; their allowed tools join the registry.",
    )
    paths: PathsSpec = Field(default_factory=PathsSpec, description="Folder layout.")
    http: HttpSpec = Field(default_factory=HttpSpec, description="http_request tool limits.")
    server: ServerSpec = Field(default_factory=ServerSpec, description="Server defaults.")
    limits: LimitsSpec = Field(
        default_factory=LimitsSpec, description="Bounds on templates and expressions."
    )
    threads: ThreadsSpec = Field(default_factory=ThreadsSpec, description="Conversation threads.")
    policy: PolicySpec = Field(
        default_factory=PolicySpec, description="Rules validate enforces (docs/review.md)."
    )
    durability: Durability | None = Field(
        None,
        description=(
            "How runs are checkpointed unless their flow or the run says otherwise: sync (the default), async, exit "
            'or none. See docs/runtime.md, "Durability".'
        ),
    )
    trace: bool | None = Field(
        None,
        description=(
            "false: runs with durability none record no event trace unless their flow or the run says otherwise "
            "(the default is true)."
        ),
    )
    synchronous: Synchronous | None = Field(
        None,
        description=(
            "What the commits of runs survive unless their flow says otherwise: normal (a crash of the "
            "process; the default) or full (also a power cut: each commit waits for the disk). "
            'See docs/runtime.md, "The disk guarantee".'
        ),
    )
    budget: BudgetSpec | None = Field(
        None,
        description=(
            "The yard's default budget of a run: tokens, cost_usd, model_calls, wall_time, and `per_turn` for thread "
            "turns; a flow's `budget:` keys win (docs/observability.md)."
        ),
    )
    retention: RetentionSpec = Field(
        default_factory=RetentionSpec,
        description=(
            "How long ended runs are kept (`blockyard gc`, daily in `serve`; docs/runtime.md)."
        ),
    )
    telemetry: TelemetrySpec | None = Field(
        None,
        description=(
            "OpenTelemetry traces of every run, sent over OTLP/HTTP (needs the `otel` extra; docs/observability.md)."
        ),
    )
    notify: list[NotifySpec] = Field(
        default_factory=empty_list,
        description="URLs `blockyard serve` posts runs of the yard's flows to when they wait at a gate or end, "
        'besides each run\'s own `webhook` (docs/serve.md, "Webhooks").',
    )
    database: DatabaseUrl | None = Field(
        None,
        description=(
            "The state database on a Postgres server, as a URL `postgresql://user:password@host:port/name`; "
            "without it, the SQLite file `paths.state`. The environment variable BLOCKYARD_DATABASE_URL wins "
            "over it. See docs/postgres.md."
        ),
    )
