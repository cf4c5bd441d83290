"""`provider: google` — Gemini through langchain-google-genai, an optional extra (`pip install 'blockyard[google]'`).

The Gemini Developer API (generativelanguage.googleapis.com): the key comes from the environment,
`base_url` replaces the API root (a gateway, a proxy). Vertex AI with Google Cloud credentials is
not supported (docs/models.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from engine.models.errors import ModelError
from engine.models.providers.chat import ChatGenerator
from engine.spec import ModelProfile, parse_duration

DEFAULT_KEY_ENV = "GOOGLE_API_KEY"
EXTRA = "google"
INSTALL = f"pip install 'blockyard[{EXTRA}]'"


def make(profile: ModelProfile, name: str, env: Mapping[str, str]) -> ChatGenerator:
    """A generator for a google profile, or a ModelError naming the extra when it is not installed."""
    if importlib.util.find_spec("langchain_google_genai") is None:
        raise ModelError(f"provider 'google' needs `{INSTALL}` (model profile '{name}')",
                         provider="google", model=profile.name)
    from langchain_google_genai import ChatGoogleGenerativeAI  # the optional extra, checked above

    if not profile.name:
        raise ModelError(f"model profile '{name}' (google) needs `name`, e.g. gemini-2.5-flash", provider="google")
    model = profile.name
    timeout = parse_duration(profile.timeout) if profile.timeout else None

    optional = {"base_url": profile.base_url, "max_tokens": profile.max_tokens, "timeout": timeout,
                "additional_headers": profile.headers}
    settings = {name: value for name, value in optional.items() if value is not None}  # None would erase defaults

    def client(key: str) -> Any:
        # vertexai=False: otherwise, with GOOGLE_GENAI_USE_VERTEXAI set, the client would copy the key
        # into os.environ while it builds itself.
        # temperature is always passed: None leaves it to the server (the client's own default is 0.7).
        # The SDK counts attempts, not retries (0 and 1 both mean one attempt): one more than the retries.
        return ChatGoogleGenerativeAI(model=model, api_key=key, vertexai=False, temperature=profile.temperature,
                                      max_retries=(profile.max_retries or 0) + 1, **settings)

    # The forced function is named in Gemini's own terms: a bare name would be read as a mode when
    # a block is called "auto", "any" or "none".
    return ChatGenerator(provider="google", model=model, profile=name, factory=client, env=env,
                         key_env=profile.api_key_env or DEFAULT_KEY_ENV, base_url=profile.base_url,
                         timeout=timeout,
                         tool_choice=lambda tool: {"mode": "ANY", "allowed_function_names": [tool]})
