"""Memory scopes: `users/ada` <-> store namespaces."""

from __future__ import annotations

import re

from engine.errors import UsageError

_SEGMENT = re.compile(r"^[A-Za-z0-9_.@:+-]{1,128}$")


def parse_scope(scope: str) -> tuple[str, ...]:
    """'users/ada' -> ('users', 'ada'); refuses empty, '..'-like or odd segments."""
    parts = tuple(part for part in scope.strip().strip("/").split("/"))
    if not parts or any(not part or part in (".", "..") or not _SEGMENT.match(part) for part in parts):
        raise UsageError(f"invalid memory scope '{scope}': use segments of letters, digits and _.@:+- "
                         "separated by '/', e.g. users/ada")
    if len(parts) > 8:
        raise UsageError(f"invalid memory scope '{scope}': at most 8 segments")
    return parts


def preferences_namespace(scope: str) -> tuple[str, ...]:
    return (*parse_scope(scope), "preferences")


def history_namespace(scope: str, flow: str) -> tuple[str, ...]:
    return (*parse_scope(scope), "flows", flow, "history")
