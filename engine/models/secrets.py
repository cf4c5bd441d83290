"""API keys: read from the environment at call time, never kept in messages or reprs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from engine.core.redaction import MASK as _MASK
from engine.models.errors import ModelError


def read_key(env: Mapping[str, str], variable: str, *, what: str) -> str:
    """The key in env[variable], or a ModelError naming the variable (never a value)."""
    key = env.get(variable, "").strip()
    if not key:
        raise ModelError(f"{what} needs an API key: set the environment variable {variable}")
    return key


def fingerprint(key: str) -> str:
    """A digest to tell keys apart (client caches) without holding the key itself."""
    return hashlib.sha256(key.encode()).hexdigest()


def redact(text: str, *secrets: str | None) -> str:
    """text with every occurrence of each secret masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, _MASK)
    return text


def public_url(url: str | None) -> str | None:
    """url without user:password@ or query string, fit for messages."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
