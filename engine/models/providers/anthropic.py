"""`provider: anthropic` — the optional `anthropic` extra (engine/extras.py names its install)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from engine import extras
from engine.models.errors import ModelError
from engine.models.providers.chat import ChatGenerator
from engine.spec import ModelProfile, parse_duration

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = 1024  # Anthropic's API requires a bound


def make(profile: ModelProfile, name: str, env: Mapping[str, str]) -> ChatGenerator:
    """A generator for an anthropic profile, or a ModelError when the extra is not installed."""
    if importlib.util.find_spec("langchain_anthropic") is None:
        raise ModelError(f"provider 'anthropic' (model profile '{name}'): {extras.missing('anthropic')}",
                         provider="anthropic", model=profile.name)
    from langchain_anthropic import ChatAnthropic  # the optional extra, checked above

    if not profile.name:
        raise ModelError(f"model profile '{name}' (anthropic) needs `name`, e.g. claude-sonnet-4-5",
                         provider="anthropic")
    model = profile.name
    timeout = parse_duration(profile.timeout) if profile.timeout else None

    optional = {"base_url": profile.base_url, "temperature": profile.temperature, "timeout": timeout,
                "default_headers": profile.headers}
    settings = {name: value for name, value in optional.items() if value is not None}  # None would erase defaults

    def client(key: str) -> Any:
        return ChatAnthropic(model=model, api_key=key, max_tokens=profile.max_tokens or DEFAULT_MAX_TOKENS,
                             max_retries=profile.max_retries or 0, **settings)

    # Anthropic forces a tool by its name ("required" would be read as a tool called "required").
    return ChatGenerator(provider="anthropic", model=model, profile=name, factory=client, env=env,
                         key_env=profile.api_key_env or DEFAULT_KEY_ENV, base_url=profile.base_url,
                         timeout=timeout, tool_choice=lambda tool: tool)
