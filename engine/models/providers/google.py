"""`provider: google` — Gemini through langchain-google-genai, the optional `google` extra.

The Gemini Developer API (generativelanguage.googleapis.com): the key comes from the environment,
`base_url` replaces the API root (a gateway, a proxy). The API version is fixed here, not left to
the SDK: requests go to `<root>/v1beta/models/<name>:generateContent` (`:streamGenerateContent`),
with or without `base_url`. Vertex AI with Google Cloud credentials is not supported (docs/models.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from engine.core import extras
from engine.models.errors import ModelError
from engine.models.providers.chat import ChatGenerator
from engine.spec import ModelProfile, parse_duration

DEFAULT_KEY_ENV = "GOOGLE_API_KEY"
EXTRA = "google"
# The Gemini Developer API's layout, where generateContent has every feature. Never left to the SDK:
# google-genai's default moved (v1beta up to 2.19, v1 in 3.6) and GOOGLE_GENAI_API_VERSION changes it.
# With it fixed, a gateway sees the paths Google serves. Smart blocks (engine/smart/lm.py) use it too.
GEMINI_API_VERSION = "v1beta"
API_VERSION_SINCE = (
    "4.2.3"  # the langchain-google-genai release that passes `api_version` to the SDK
)


def make(profile: ModelProfile, name: str, env: Mapping[str, str]) -> ChatGenerator:
    """A generator for a google profile, or a ModelError naming the extra when it is not installed."""
    if importlib.util.find_spec("langchain_google_genai") is None:
        raise ModelError(
            f"provider 'google' (model profile '{name}'): {extras.missing(EXTRA)}",
            provider="google",
            model=profile.name,
        )
    from langchain_google_genai import ChatGoogleGenerativeAI  # the optional extra, checked above

    if "api_version" not in ChatGoogleGenerativeAI.model_fields:
        # older releases cannot fix the version
        raise ModelError(
            f"provider 'google' needs langchain-google-genai {API_VERSION_SINCE} or later: "
            f"{extras.install(EXTRA, upgrade=True)} (model profile '{name}')",
            provider="google",
            model=profile.name,
        )
    if not profile.name:
        raise ModelError(
            f"model profile '{name}' (google) needs `name`, e.g. gemini-2.5-flash",
            provider="google",
        )
    model = profile.name
    timeout = parse_duration(profile.timeout) if profile.timeout else None

    optional = {
        "base_url": profile.base_url,
        "max_tokens": profile.max_tokens,
        "timeout": timeout,
        "additional_headers": profile.headers,
    }
    settings = {
        name: value for name, value in optional.items() if value is not None
    }  # None would erase defaults

    def client(key: str) -> Any:
        # vertexai=False: otherwise, with GOOGLE_GENAI_USE_VERTEXAI set, the client would copy the key
        # into os.environ while it builds itself.
        # temperature is always passed: None leaves it to the server (the client's own default is 0.7).
        # The SDK counts attempts, not retries (0 and 1 both mean one attempt): one more than the retries.
        return ChatGoogleGenerativeAI(
            model=model,
            api_key=key,
            vertexai=False,
            api_version=GEMINI_API_VERSION,
            temperature=profile.temperature,
            max_retries=(profile.max_retries or 0) + 1,
            **settings,
        )

    # The forced function is named in Gemini's own terms: a bare name would be read as a mode when
    # a block is called "auto", "any" or "none".
    return ChatGenerator(
        provider="google",
        model=model,
        profile=name,
        factory=client,
        env=env,
        key_env=profile.api_key_env or DEFAULT_KEY_ENV,
        base_url=profile.base_url,
        timeout=timeout,
        tool_choice=lambda tool: {"mode": "ANY", "allowed_function_names": [tool]},
    )
