"""The tool registry: built-in tools plus the yard's Python tools declared in blockyard.yaml.

`build_registry(config, root)` once per yard load, then `registry.with_workspace(path)` per run
(cheap) so file tools are confined to that run's folder.

Exports load on first use: the validator imports `engine.tools.names` and nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from engine.tools.names import BUILTIN_TOOLS

if TYPE_CHECKING:
    # each name from its home in _LAZY: import-linter sees the edges, mypy types the names
    # (tests/test_registries.py keeps the two in step)
    from engine.tools.errors import ToolError
    from engine.tools.registry import ToolRegistry, build_registry
    from engine.tools.tool import Tool

__all__ = ["BUILTIN_TOOLS", "Tool", "ToolError", "ToolRegistry", "build_registry"]

_LAZY = {
    "Tool": "engine.tools.tool",
    "ToolError": "engine.tools.errors",
    "ToolRegistry": "engine.tools.registry",
    "build_registry": "engine.tools.registry",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.tools' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
