"""Shared pieces of the spec: the base model, value types, durations, model profiles."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
DURATION_PATTERN = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h|d)$"
_DURATION = re.compile(DURATION_PATTERN)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DURATION_DAYS = 3650
MAX_DURATION = MAX_DURATION_DAYS * 86400.0  # ten years, in seconds: longer is surely a typo

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
_NAME = re.compile(NAME_PATTERN)
# a name that becomes a file's name (flows/<name>.yaml, blocks/<name>.yaml) stays well within the 255
# bytes a file system allows for one name
MAX_FILE_NAME = 200


def file_name_problem(name: str, kind: str = "flow") -> str | None:
    """Why `name`, given on the command line or in a request, cannot name a flow or block whose file is
    <folder>/<name>.yaml — the name rule of a flow's `flow:` (NAME_PATTERN) and a length its file system
    accepts — or None. Checked before anything is written: a name is never a path."""
    if len(name) > MAX_FILE_NAME:
        return (
            f"it is {len(name):,} characters long; a {kind}'s name is at most {MAX_FILE_NAME} (it names the "
            "file <name>.yaml)"
        )
    if _NAME.fullmatch(name) is None:
        return f"a {kind}'s name is letters, digits, _ and - (starting with a letter or _), never a path"
    return None


Duration = Annotated[
    str, Field(pattern=DURATION_PATTERN, description="A duration such as 500ms, 30s, 5m, 2h, 1d.")
]

# How a run is checkpointed (docs/runtime.md, "Durability"): LangGraph's modes, and `none` for no checkpoints
Durability = Literal["sync", "async", "exit", "none"]
DURABILITY_MODES: tuple[str, ...] = ("sync", "async", "exit", "none")
DEFAULT_DURABILITY = "sync"
# What a run's commits survive (docs/runtime.md, "The disk guarantee"): a crash of the process (normal),
# or also a power cut (full)
Synchronous = Literal["normal", "full"]

ValueType = Literal["string", "integer", "number", "boolean", "array", "object", "any"]


def duration_seconds(text: str) -> float:
    """'1.5s' -> 1.5, exactly as written (possibly beyond MAX_DURATION, or inf)."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid duration '{text}' (use e.g. 500ms, 30s, 5m, 2h, 1d)")
    return float(text[: match.start(2)]) * _UNITS[match.group(2)]


def parse_duration(text: str) -> float:
    """'1.5s' -> 1.5 (seconds), at most MAX_DURATION. `blockyard validate` refuses longer durations
    (BY515); a definition pinned before that rule is held to it here, so that no deadline, sleep
    or socket timeout computed from a duration can overflow."""
    return min(duration_seconds(text), MAX_DURATION)


def empty_list() -> list[Any]:
    """The default of a list setting. pydantic asks every default factory for its signature (does it
    take the validated data?), and a builtin such as `list` or `dict` answers slowly (~0.1 ms, the
    text signature parsed, then refused): some 40 fields of them were a tenth of building the spec
    models, which every `blockyard` command does as it starts. A plain function answers at once."""
    return []


def empty_dict() -> dict[str, Any]:
    """The default of a mapping setting (see `empty_list`)."""
    return {}


class Spec(BaseModel):
    """Validated definitions are immutable and reject unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class TypeSpec(Spec):
    """A declared value: the type of a block or flow input/output, or an approval field."""

    type: ValueType = Field(
        "any",
        description="JSON type of the value: string, integer, number, boolean, "
        "array, object, or any.",
    )
    description: str | None = Field(
        None, description="What the value means; shown in docs and forms."
    )
    default: Any = Field(
        None, description="Value used when nothing binds this input; makes it optional."
    )
    enum: list[Any] | None = Field(
        None, description="The only values allowed (a decide block's choices)."
    )
    items: TypeSpec | None = Field(None, description="Type of each element, for arrays.")
    properties: dict[str, TypeSpec] | None = Field(
        None, description="Declared keys, for objects (other keys are allowed)."
    )

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set


class Pricing(Spec):
    """What a model costs, in US dollars per million tokens (docs/observability.md, "Cost")."""

    input_per_mtok: float = Field(..., ge=0, description="Price of a million input tokens.")
    output_per_mtok: float = Field(..., ge=0, description="Price of a million output tokens.")
    cached_input_per_mtok: float | None = Field(
        None,
        ge=0,
        description="Price of a million input tokens read from the provider's prompt cache "
        "(unset: the input price).",
    )


class ModelProfile(Spec):
    """How to reach a model: a provider plus its settings. Keys come only from the environment."""

    provider: Literal["openai", "azure", "anthropic", "google", "mock"] = Field(
        ...,
        description="openai (any OpenAI-compatible endpoint), azure, anthropic, google (Gemini), "
        "or mock (offline).",
    )
    name: str | None = Field(None, description="Model name sent to the provider, e.g. gpt-4o-mini.")
    base_url: str | None = Field(
        None,
        description="Endpoint of an OpenAI-compatible server "
        "(Ollama, vLLM, LM Studio, a gateway); the resource "
        "endpoint for azure; the API root for anthropic and google.",
    )
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="Name of the environment variable holding the API key.",
    )
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int | None = Field(None, ge=1, description="Upper bound on generated tokens.")
    timeout: Duration | None = Field(None, description="Timeout of one model call.")
    max_retries: int | None = Field(
        None, ge=0, le=10, description="Client-side retries of one call."
    )
    headers: dict[str, str] | None = Field(
        None, description="Extra HTTP headers sent with every request."
    )
    api_version: str | None = Field(None, description="API version (azure).")
    delay: Duration | None = Field(None, description="mock only: simulated latency per call.")
    replies: dict[str, list[Any]] | None = Field(
        None, description="mock only: scripted replies per block or step id, used in order."
    )
    pricing: Pricing | None = Field(
        None,
        description="Prices of this model in USD per million tokens; unset: the price table of LiteLLM "
        "when it knows the model, else unknown (docs/observability.md).",
    )


RetryOn = Literal["timeout", "rate_limit", "server_error", "connection", "any"]
_RETRIED: tuple[RetryOn, ...] = (
    "timeout",
    "rate_limit",
    "server_error",
    "connection",
)  # by default


class RetrySpec(Spec):
    """Retries of a block with exponential backoff on transient failures."""

    attempts: int = Field(3, ge=1, le=20, description="Total attempts, the first included.")
    backoff: float = Field(
        2.0, ge=1.0, le=10.0, description="Multiplier of the wait between attempts."
    )
    initial: Duration = Field("500ms", description="Wait before the second attempt.")
    on: list[RetryOn] = Field(
        default_factory=lambda: list(_RETRIED), description="Which failures are retried."
    )
