"""The compiler: a pinned Bundle -> a LangGraph graph (one module per construct).

`compile_flow(bundle, checkpointer=..., store=...) -> CompiledFlow`. Nothing here reads files.

The package's names load on first use (PEP 562): the graph model of a flow (`flowgraph.py`,
`draw.py`) imports no LangGraph, and `blockyard diff` draws it without paying for LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.nodes.context import RunContext
from engine.nodes.errors import CompileError, StepFailed

if TYPE_CHECKING:
    from engine.compile.compiled import CompiledFlow
    from engine.compile.flow import compile_flow

__all__ = ["CompileError", "CompiledFlow", "RunContext", "StepFailed", "compile_flow"]


def __getattr__(name: str) -> Any:
    # LangGraph loads with these only: `blockyard diff` imports the graph model of this package without it
    if name == "CompiledFlow":
        from engine.compile.compiled import CompiledFlow  # LangGraph

        return CompiledFlow
    if name == "compile_flow":
        from engine.compile.flow import compile_flow  # LangGraph

        return compile_flow
    raise AttributeError(f"module 'engine.compile' has no attribute '{name}'")
