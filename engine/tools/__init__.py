"""The tool registry: built-in tools plus the yard's Python tools declared in blockyard.yaml.

`build_registry(config, root)` once per yard load, then `registry.with_workspace(path)` per run
(cheap) so file tools are confined to that run's folder.

Exports load on first use: the validator imports `engine.tools.names` and nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engine.tools.names import BUILTIN_TOOLS

if TYPE_CHECKING:
    from engine.tools.errors import ToolError
    from engine.tools.registry import Tool, ToolRegistry, build_registry

__all__ = ["BUILTIN_TOOLS", "Tool", "ToolError", "ToolRegistry", "build_registry"]

_LAZY = {"Tool": "engine.tools.tool", "ToolError": "engine.tools.errors", "ToolRegistry": "engine.tools.registry",
         "build_registry": "engine.tools.registry"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.tools' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
