"""Blockyard: declarative LLM agent flows in YAML, compiled to LangGraph.

`from engine import Yard` is the Python API (docs/runtime.md). The import is lazy so that
importing a part of the engine (`blockyard validate` imports engine.validate) never pulls in
LangGraph. How the packages fit together: docs/architecture.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.core.version import __version__

__all__ = ["Yard", "__version__"]

if TYPE_CHECKING:
    from engine.runtime.yard import Yard


def __getattr__(name: str) -> Any:
    if name == "Yard":
        from engine.runtime.yard import Yard  # LangGraph: only for the Python API

        return Yard
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
