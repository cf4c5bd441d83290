"""Typed, immutable definitions (the AST). The JSON Schemas in schemas/ are generated from these."""

from __future__ import annotations

from engine.spec.block import (
    BLOCK_KINDS,
    MODEL_KINDS,
    BlockSpec,
    GuardrailSpec,
    MemorySpec,
    PromptSpec,
)
from engine.spec.common import ModelProfile, RetrySpec, TypeSpec, parse_duration
from engine.spec.config import ConfigSpec, McpServerSpec, ToolDecl
from engine.spec.flow import (
    END,
    ApprovalSpec,
    FlowSpec,
    ForeachSpec,
    LoopSpec,
    MapSpec,
    MemoryScope,
    Route,
    RouterSpec,
    ScheduleSpec,
    StepSpec,
)

__all__ = [
    "BLOCK_KINDS",
    "END",
    "MODEL_KINDS",
    "ApprovalSpec",
    "BlockSpec",
    "ConfigSpec",
    "FlowSpec",
    "ForeachSpec",
    "GuardrailSpec",
    "LoopSpec",
    "MapSpec",
    "McpServerSpec",
    "MemoryScope",
    "MemorySpec",
    "ModelProfile",
    "PromptSpec",
    "RetrySpec",
    "Route",
    "RouterSpec",
    "ScheduleSpec",
    "StepSpec",
    "ToolDecl",
    "TypeSpec",
    "parse_duration",
]
