"""The compiler: a pinned Bundle -> a LangGraph graph (one module per construct).

`compile_flow(bundle, checkpointer=..., store=...) -> CompiledFlow`. Nothing here reads files.
"""

from __future__ import annotations

from engine.compile.compiled import CompiledFlow
from engine.compile.flow import compile_flow
from engine.nodes.context import RunContext
from engine.nodes.errors import CompileError, StepFailed

__all__ = ["CompileError", "CompiledFlow", "RunContext", "StepFailed", "compile_flow"]
