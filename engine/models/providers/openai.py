"""`provider: openai` — OpenAI or any OpenAI-compatible server, through langchain-openai."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.models.providers.chat import ChatGenerator
from engine.spec import ModelProfile, parse_duration

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MODEL = "gpt-4o-mini"


def make(profile: ModelProfile, name: str, env: Mapping[str, str]) -> ChatGenerator:
    """A generator for an openai profile; the key is read from env[profile.api_key_env] per call.

    With a `base_url` and no `api_key_env`, a missing OPENAI_API_KEY is fine (local servers such
    as Ollama need no key); naming `api_key_env` always makes the key required.
    """
    from langchain_openai import ChatOpenAI  # LangChain: only when an openai profile is used

    model = profile.name or DEFAULT_MODEL
    timeout = parse_duration(profile.timeout) if profile.timeout else None

    def client(key: str) -> Any:
        # use_responses_api=False: OpenAI-compatible servers only speak /chat/completions.
        # max_retries: LangGraph's RetryPolicy retries whole steps; client retries would multiply them.
        return ChatOpenAI(
            model=model,
            base_url=profile.base_url,
            api_key=key,
            temperature=profile.temperature,
            max_tokens=profile.max_tokens,
            timeout=timeout,
            max_retries=profile.max_retries or 0,
            default_headers=profile.headers,
            use_responses_api=False,
            # usage in streamed replies too (`stream_options.include_usage`): LangChain asks
            # for it only from api.openai.com, but vLLM, Ollama, LM Studio and llama.cpp
            # servers report it as well, and a model call's tokens and cost need it
            stream_usage=True,
        )

    return ChatGenerator(
        provider="openai",
        model=model,
        profile=name,
        factory=client,
        env=env,
        key_env=profile.api_key_env or DEFAULT_KEY_ENV,
        key_required=profile.api_key_env is not None or profile.base_url is None,
        base_url=profile.base_url,
        timeout=timeout,
    )
