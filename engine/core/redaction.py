"""Masking API keys wherever a run's data goes: outputs, checkpoints, events, logs, errors.

A model can echo its API key (a prompt injection, a misbehaving server): the key must not reach
the state database, the trace or a log from there. The keys masked are the values of every
`api_key_env` variable of the yard's model profiles (blockyard.yaml's and blocks' inline ones)
and of the providers' default variables, when set (docs/models.md, "Keys and secrets").

Rule: an occurrence of a key is replaced by MASK (`***`). Keys shorter than MIN_KEY_LENGTH
characters are not masked — a short value ("test", "local") is likely a placeholder for a local
server and would mask ordinary words. In binary data (checkpoint blobs) a key is replaced by as
many `*` as it has bytes, which keeps the serialized lengths right.

Imports nothing of LangChain or LangGraph: the runtime, the CLI's readers and the server's logs
use it.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
MIN_KEY_LENGTH = 8
# The variables providers read when a profile names no `api_key_env` (engine/models/providers).
# GEMINI_API_KEY too: Google's own tools read it, and docs/models.md points openai profiles at it for Gemini.
DEFAULT_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
)


class Masker:
    """Masks a set of secret values in text, nested data and bytes; keys can be added at any time
    (thread-safe). An empty Masker returns everything as it is, at the cost of one check."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._keys: tuple[str, ...] = ()
        self._blobs: tuple[bytes, ...] = ()
        self.add(keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __repr__(self) -> str:
        return f"Masker({len(self._keys)} keys)"  # never the keys

    def add(self, keys: Iterable[str]) -> None:
        """Mask these values too (blank or short ones are ignored, see MIN_KEY_LENGTH)."""
        fresh = {key.strip() for key in keys if key and len(key.strip()) >= MIN_KEY_LENGTH}
        with self._lock:
            if fresh <= set(self._keys):
                return
            # longest first: a key that contains another is masked whole
            ordered = tuple(sorted(fresh | set(self._keys), key=lambda k: (-len(k), k)))
            self._keys, self._blobs = ordered, tuple(key.encode("utf-8") for key in ordered)

    def text(self, text: str) -> str:
        for key in self._keys:
            if key in text:
                text = text.replace(key, MASK)
        return text

    def value(self, value: Any) -> Any:
        """`value` with every string in it masked: mappings (keys too), lists, tuples, and pydantic
        models such as LangChain messages (copied only when something changed)."""
        if not self._keys:
            return value
        return self._value(value)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self._value(k): self._value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._value(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self._value(item) for item in value)
        fields = getattr(type(value), "model_fields", None)
        if isinstance(fields, Mapping) and hasattr(value, "model_copy"):
            changes = {}
            for name in fields:
                before = getattr(value, name, None)
                after = self._value(before)
                if after != before:
                    changes[name] = after
            return value.model_copy(update=changes) if changes else value
        return value

    def blob(self, data: bytes) -> bytes:
        """`data` with every key's bytes replaced by as many `*` (serialized lengths stay valid)."""
        for key in self._blobs:
            if key in data:
                data = data.replace(key, b"*" * len(key))
        return data

    def held(self, text: str) -> int:
        """How many characters at the end of `text` could be the start of a key (a stream holds
        them back until the next piece tells)."""
        longest = 0
        for key in self._keys:
            for size in range(min(len(key) - 1, len(text)), longest, -1):
                if text.endswith(key[:size]):
                    longest = size
                    break
        return longest


class TokenMasker:
    """Masks keys in a stream of text pieces: a key split over several pieces is masked whole.
    Pieces go to `sink` as soon as they cannot be part of a key; `flush()` sends what is left."""

    def __init__(self, masker: Masker, sink: Any) -> None:
        self.masker = masker
        self.sink = sink
        self.pending = ""

    def __call__(self, piece: str) -> None:
        if not self.masker:
            self.sink(piece)
            return
        text = self.masker.text(self.pending + piece)
        keep = self.masker.held(text)
        ready, self.pending = text[: len(text) - keep], text[len(text) - keep :]
        if ready:
            self.sink(ready)

    def flush(self) -> None:
        if self.pending:
            rest, self.pending = self.pending, ""
            self.sink(rest)


def key_variables(profiles: Iterable[Any]) -> list[str]:
    """The environment variables that hold API keys: the profiles' `api_key_env`, and the
    providers' default variables (read when a profile names none, or for the implicit default)."""
    names = [*DEFAULT_KEY_VARIABLES]
    names.extend(str(p.api_key_env) for p in profiles if getattr(p, "api_key_env", None))
    return list(dict.fromkeys(names))


def key_values(variables: Iterable[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The values of those environment variables that are set."""
    source = os.environ if env is None else env
    return [value for name in variables if (value := source.get(name, "").strip())]


# `scheme://user:password@` in a database URL, and `password=...` in libpq's key=value form
_URL_PASSWORD = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)(?P<secret>[^@\s]*)(?=@)"
)
_KV_PASSWORD = re.compile(
    r"(?P<head>\bpassword\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE
)


def mask_url(text: str) -> str:
    """`text` with the password of every database URL in it (and libpq's `password=...`) as MASK:
    `postgresql://ada:***@db/yard`. What shows a database's location to people goes through it."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _KV_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


# Every key any yard of this process has masked: for sinks that see no particular run (the
# server's log lines). Keys are only ever added.
KNOWN = Masker()
