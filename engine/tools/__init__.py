"""The tool registry: built-in tools plus the yard's Python tools declared in blockyard.yaml.

`build_registry(config, root)` once per yard load, then `registry.with_workspace(path)` per run
(cheap) so file tools are confined to that run's folder.
"""

from __future__ import annotations

from engine.tools.errors import ToolError
from engine.tools.names import BUILTIN_TOOLS
from engine.tools.registry import Tool, ToolRegistry, build_registry

__all__ = ["BUILTIN_TOOLS", "Tool", "ToolError", "ToolRegistry", "build_registry"]
