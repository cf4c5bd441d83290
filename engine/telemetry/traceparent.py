"""The W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/): a caller's trace,
which a run it starts over HTTP continues. Only the standard library: the server reads the header
whether or not traces are exported.

    00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
    version-trace id (32 hex)-parent span id (16 hex)-flags (01: sampled)

An invalid header is ignored, as the specification requires: the run starts a trace of its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

HEADER = "traceparent"
_FORM = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
MAX_LENGTH = 512  # a later version may add fields; nothing sane is longer


@dataclass(frozen=True)
class Parent:
    """A remote span a run's root span is the child of."""

    trace_id: int
    span_id: int
    sampled: bool

    def header(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{'01' if self.sampled else '00'}"


def parse(text: str | None) -> Parent | None:
    """The parent a `traceparent` value names, or None when it is missing or invalid."""
    if not text or len(text) > MAX_LENGTH:
        return None
    match = _FORM.fullmatch(text.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    trace, span = int(trace_id, 16), int(span_id, 16)
    if trace == 0 or span == 0:
        return None
    return Parent(trace, span, bool(int(flags, 16) & 1))


def valid(text: str | None) -> str | None:
    """`text` when it is a valid traceparent (normalized), else None: what a server keeps for a run."""
    parent = parse(text)
    return parent.header() if parent is not None else None


def from_headers(headers: Mapping[str, str]) -> str | None:
    """The valid traceparent of an HTTP request's headers (case-insensitive mapping), or None."""
    return valid(headers.get(HEADER))
