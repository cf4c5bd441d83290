"""`provider: azure` — Azure OpenAI deployments, through langchain-openai's AzureChatOpenAI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.models.errors import ModelError
from engine.models.providers.chat import ChatGenerator
from engine.spec import ModelProfile, parse_duration

DEFAULT_KEY_ENV = "AZURE_OPENAI_API_KEY"


def make(profile: ModelProfile, name: str, env: Mapping[str, str]) -> ChatGenerator:
    """A generator for an azure profile: `name` is the deployment, `base_url` the endpoint.

    The endpoint and API version fall back to AZURE_OPENAI_ENDPOINT and OPENAI_API_VERSION.
    """
    from langchain_openai import AzureChatOpenAI  # LangChain: only when an azure profile is used

    what = f"model profile '{name}' (azure)"
    if not profile.name:
        raise ModelError(f"{what} needs `name`: the deployment to call", provider="azure")
    endpoint = profile.base_url or env.get("AZURE_OPENAI_ENDPOINT")
    if not endpoint:
        raise ModelError(
            f"{what} needs `base_url` (the resource endpoint) or AZURE_OPENAI_ENDPOINT",
            provider="azure",
            model=profile.name,
        )
    version = profile.api_version or env.get("OPENAI_API_VERSION")
    if not version:
        raise ModelError(
            f"{what} needs `api_version` (or OPENAI_API_VERSION)",
            provider="azure",
            model=profile.name,
        )
    timeout = parse_duration(profile.timeout) if profile.timeout else None
    deployment = profile.name

    def client(key: str) -> Any:
        return AzureChatOpenAI(
            azure_deployment=deployment,
            model=deployment,
            azure_endpoint=endpoint,
            api_version=version,
            api_key=key,
            temperature=profile.temperature,
            max_tokens=profile.max_tokens,
            timeout=timeout,
            max_retries=profile.max_retries or 0,
            default_headers=profile.headers,
            stream_usage=True,
        )  # usage in streams too

    return ChatGenerator(
        provider="azure",
        model=deployment,
        profile=name,
        factory=client,
        env=env,
        key_env=profile.api_key_env or DEFAULT_KEY_ENV,
        base_url=endpoint,
        timeout=timeout,
    )
