"""Model errors, and which failures are worth a retry.

`is_transient` is what the compiler hands to LangGraph's `RetryPolicy(retry_on=...)`. It must
be cheap and must not import the provider SDKs (validate never loads them), so it only checks
against classes of modules that are already imported: an exception of a module that was never
imported cannot exist.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from engine.core.errors import BlockyardError

TRANSIENT_KINDS = frozenset({"timeout", "rate_limit", "server_error", "connection"})


class ModelError(BlockyardError):
    """A model call failed. The message names provider and model, never the API key.

    `kind` is one of TRANSIENT_KINDS when retrying may help, else None; `status` is the HTTP
    status when the server answered with an error.
    """

    code = "model_failed"

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        kind: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.kind = kind
        self.status = status

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r}, kind={self.kind!r}, status={self.status!r})"


class ModelOutputError(ModelError):
    """The model's output did not match the output schema, even after the repair retry."""

    code = "model_output_invalid"


def is_transient(exc: BaseException, kinds: Iterable[str]) -> bool:
    """True when `exc` is a failure of one of `kinds` (timeout, rate_limit, server_error, connection, any).

    Client errors (HTTP 4xx other than 429), tool errors, validation errors and configuration
    errors are never transient, whatever the kinds.
    """
    wanted = set(kinds)
    kind = failure_kind(exc)
    if kind is not None:
        return kind in wanted or "any" in wanted
    return "any" in wanted and not _permanent(exc)


def failure_kind(exc: BaseException) -> str | None:
    """The transient kind of `exc`, or None when it is not a known transient failure."""
    if isinstance(exc, ModelError):
        return exc.kind
    status = status_of(exc)
    if status is not None:
        return status_kind(status)
    if _is_timeout(exc):
        return "timeout"
    if _is_connection(exc):
        return "connection"
    return None


def status_kind(status: int) -> str | None:
    """rate_limit for 429, server_error for 5xx, None for any other status."""
    if status == 429:
        return "rate_limit"
    if status >= 500:
        return "server_error"
    return None


def _classes(module: str, *names: str) -> tuple[type[BaseException], ...]:
    loaded = sys.modules.get(module)
    if loaded is None:
        return ()
    found: list[type[BaseException]] = []
    for name in names:
        cls: Any = getattr(loaded, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


_HTTPX = ("httpx", "httpx2")  # the openai SDK ships its own copy of httpx under the second name
_SDKS = ("openai", "anthropic")  # same error hierarchy in both SDKs


def _sdk(*names: str) -> tuple[type[BaseException], ...]:
    found: tuple[type[BaseException], ...] = ()
    for module in _SDKS:
        found += _classes(module, *names)
    return found


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a provider's error reply, or None when the failure is not one."""
    if isinstance(exc, _sdk("APIStatusError")):
        return int(getattr(exc, "status_code", 0)) or None
    for module in _HTTPX:
        if isinstance(exc, _classes(module, "HTTPStatusError")):
            return int(exc.response.status_code)  # type: ignore[attr-defined]
    # Gemini (google-genai): APIError carries the status as `code`; langchain-google-genai raises
    # its own classes for 4xx replies, chained to the SDK's error.
    for error in (exc, exc.__cause__):
        if isinstance(error, _classes("google.genai.errors", "APIError")):
            return int(getattr(error, "code", 0) or 0) or None
    return None


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError since 3.11
        return True
    timeouts = _sdk("APITimeoutError") + _classes("langgraph.errors", "NodeTimeoutError")
    for module in _HTTPX:
        timeouts += _classes(module, "TimeoutException")
    return isinstance(exc, timeouts)


def _is_connection(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError):
        return True
    # google-genai's transport
    errors = _sdk("APIConnectionError") + _classes("aiohttp", "ClientConnectionError")
    for module in _HTTPX:
        errors += _classes(module, "TransportError")
    return isinstance(exc, errors)


def _permanent(exc: BaseException) -> bool:
    """Failures a retry cannot fix: our own errors (config, validation, tools) and bad data."""
    if isinstance(exc, BlockyardError):
        return True
    if status_of(exc) is not None:
        return True  # a 4xx: the 5xx and 429 ones were classified as transient before
    permanent = _classes("jsonschema", "ValidationError") + _classes("pydantic", "ValidationError")
    return isinstance(exc, permanent)
