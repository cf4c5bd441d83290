"""Blockyard: declarative LLM agent flows in YAML, compiled to LangGraph.

`from engine import Yard` is the Python API. The import is lazy so that `blockyard validate`
never pulls in LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Yard", "__version__"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from engine.runtime.yard import Yard


def __getattr__(name: str) -> Any:
    if name == "Yard":
        from engine.runtime.yard import Yard

        return Yard
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
