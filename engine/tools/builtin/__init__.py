"""Built-in tools; names in engine/tools/names.py (kept import-free for the validator)."""

from __future__ import annotations

from pathlib import Path

from engine.spec import ConfigSpec
from engine.tools.builtin import clock, files, http
from engine.tools.tool import Tool


def builtin_tools(
    config: ConfigSpec, workspace: Path | None, confine: Path | None = None
) -> list[Tool]:
    """Every built-in tool, with the yard's http limits and file tools confined to `workspace`
    (which must stay inside `confine`, the yard, when given)."""
    return [clock.tool(), http.tool(config.http), *files.file_tools(workspace, confine)]
