"""`provider: anthropic` — the optional `anthropic` extra (engine/core/extras.py names its install)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import TypedDict

from pydantic import SecretStr

from engine.core import extras
from engine.models.errors import ModelError
from engine.models.providers.chat import ChatGenerator
from engine.spec import ModelProfile, parse_duration

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = 1024  # Anthropic's API requires a bound


class Settings(TypedDict, total=False):
    """What a profile may set of ChatAnthropic, by the client's field names (its aliases, `base_url`,
    `timeout`, would fall into its untyped **kwargs and escape mypy). A setting the profile leaves
    out is left out here too: None would erase the client's default."""

    anthropic_api_url: str
    temperature: float
    default_request_timeout: float
    default_headers: Mapping[str, str]


def _settings(profile: ModelProfile, timeout: float | None) -> Settings:
    found = Settings()
    if profile.base_url is not None:
        found["anthropic_api_url"] = profile.base_url
    if profile.temperature is not None:
        found["temperature"] = profile.temperature
    if timeout is not None:
        found["default_request_timeout"] = timeout
    if profile.headers is not None:
        found["default_headers"] = profile.headers
    return found


def make(profile: ModelProfile, name: str, env: Mapping[str, str]) -> ChatGenerator:
    """A generator for an anthropic profile, or a ModelError when the extra is not installed."""
    if importlib.util.find_spec("langchain_anthropic") is None:
        raise ModelError(
            f"provider 'anthropic' (model profile '{name}'): {extras.missing('anthropic')}",
            provider="anthropic",
            model=profile.name,
        )
    from langchain_anthropic import ChatAnthropic  # the optional extra, checked above

    if not profile.name:
        raise ModelError(
            f"model profile '{name}' (anthropic) needs `name`, e.g. claude-sonnet-4-5",
            provider="anthropic",
        )
    model = profile.name
    timeout = parse_duration(profile.timeout) if profile.timeout else None

    settings = _settings(profile, timeout)

    def client(key: str) -> ChatAnthropic:
        return ChatAnthropic(
            model=model,
            anthropic_api_key=SecretStr(key),
            max_tokens=profile.max_tokens or DEFAULT_MAX_TOKENS,
            max_retries=profile.max_retries or 0,
            **settings,
        )

    # Anthropic forces a tool by its name ("required" would be read as a tool called "required").
    return ChatGenerator(
        provider="anthropic",
        model=model,
        profile=name,
        factory=client,
        env=env,
        key_env=profile.api_key_env or DEFAULT_KEY_ENV,
        base_url=profile.base_url,
        timeout=timeout,
        tool_choice=lambda tool: tool,
    )
