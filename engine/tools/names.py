"""Names of the built-in tools (no imports: the validator reads this without loading any tool)."""

from __future__ import annotations

BUILTIN_TOOLS: frozenset[str] = frozenset(
    {"current_time", "http_request", "read_file", "write_file", "list_files"}
)
