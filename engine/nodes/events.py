"""Progress events written by nodes to LangGraph's custom stream (docs/runtime.md, Events).

Shape: {"type": ..., "step": step id, "data": {...}}. The runtime adds the run id, the time and a
sequence number, and persists them. Step ids inside subflows carry the calling step as a prefix
("research.search"); events of map items and foreach iterations carry `data.index`.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.types import StreamWriter

from engine.core.events import (
    FILE_WRITTEN,
    STEP_FAILED,
    STEP_FINISHED,
    STEP_STARTED,
    TOKEN,
    TOOL_CALL,
    WARNING,
    EventType,
)
from engine.core.values import JsonDict
from engine.nodes.errors import StepFailed

# The step event types are declared in engine/core/events.py; nodes import them from here with `emit`.
__all__ = [
    "FILE_WRITTEN",
    "STEP_FAILED",
    "STEP_FINISHED",
    "STEP_STARTED",
    "TOKEN",
    "TOOL_CALL",
    "WARNING",
    "elapsed_ms",
    "emit",
    "failed",
    "finished",
    "since",
    "warning",
]


def emit(
    writer: StreamWriter, kind: EventType, step: str, data: JsonDict, index: int | None = None
) -> None:
    if index is not None:
        data = {**data, "index": index}
    # plain text: the stream carries JSON-like data
    writer({"type": str(kind), "step": step, "data": data})


def warning(writer: StreamWriter, step: str, code: str, message: str, **data: Any) -> None:
    """A `warning` event: something the run went on after (a loop exhausted, a visit bound hit)."""
    emit(writer, WARNING, step, {"code": code, "message": message, **data})


def elapsed_ms(started: float) -> int:
    """Milliseconds since `started` (a time.monotonic() reading)."""
    return round((time.monotonic() - started) * 1000)


def failed(
    writer: StreamWriter,
    flow: str,
    label: str,
    reason: str,
    *,
    started: float,
    index: int | None = None,
    block: str | None = None,
    cause: BaseException | None = None,
) -> StepFailed:
    """Emit `step_failed` and return the StepFailed to raise (for steps that are never retried)."""
    emit(
        writer,
        STEP_FAILED,
        label,
        {"block": block, "error": reason, "duration_ms": elapsed_ms(started)},
        index,
    )
    return StepFailed(flow, label, block, reason, cause=cause, item=index)


def finished(
    writer: StreamWriter,
    label: str,
    outputs: JsonDict,
    *,
    duration_ms: int,
    index: int | None = None,
    block: str | None = None,
    **data: Any,
) -> None:
    emit(
        writer,
        STEP_FINISHED,
        label,
        {"block": block, "outputs": outputs, "duration_ms": duration_ms, **data},
        index,
    )


def since(wall_start: float | None) -> int:
    """Milliseconds since a time.time() reading kept in the state (constructs that span nodes,
    possibly resumed in another process)."""
    return max(0, round((time.time() - wall_start) * 1000)) if wall_start is not None else 0
