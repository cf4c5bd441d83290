"""The compiler: a pinned Bundle -> a LangGraph graph (one module per construct).

`compile_flow(bundle, checkpointer=..., store=...) -> CompiledFlow`. Nothing here reads files.
"""

from __future__ import annotations

from engine.compile.context import RunContext
from engine.compile.errors import CompileError, StepFailed
from engine.compile.flow import CompiledFlow, compile_flow

__all__ = ["CompileError", "CompiledFlow", "RunContext", "StepFailed", "compile_flow"]
