"""Tool failures (never retried: a tool's side effects may already have happened)."""

from __future__ import annotations

from engine.core.errors import BlockyardError


class ToolError(BlockyardError):
    """A tool could not be loaded or called; the message names the tool."""

    code = "tool_failed"
