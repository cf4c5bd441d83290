"""Why a run failed, as one clear sentence with the step it happened in."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from langgraph.errors import GraphRecursionError

from engine.core.errors import BlockyardError
from engine.core.values import JsonDict
from engine.nodes.errors import StepFailed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Failure:
    message: str
    step: str | None
    extra: JsonDict = field(default_factory=dict)


def describe(exc: BaseException, step: str | None, running: str | None, compiled: Any) -> Failure:
    """Turn whatever a graph raised into a Failure; unknown exceptions keep their type name.

    `step` is the step that started last, `running` one that had not ended (None when none).
    """
    if isinstance(exc, StepFailed):
        extra: JsonDict = {"block": exc.block} if exc.block else {}
        if exc.item is not None:
            extra["index"] = exc.item
        return Failure(
            _without_prefix(str(exc.reason), exc.flow, exc.step), exc.step or step, extra
        )
    if isinstance(exc, GraphRecursionError):
        # raised between steps: no step failed, the flow as a whole ran too long
        return Failure(str(compiled.explain(exc)), running)
    if isinstance(exc, TimeoutError) or type(exc).__name__ == "NodeTimeoutError":
        return Failure(f"timed out: {exc}" if str(exc) else "timed out", step)
    if isinstance(exc, BlockyardError):
        return Failure(str(exc), step)
    # a bug (ours or a tool's): keep the traceback for whoever debugs it, the type for the user
    log.debug("run failed with an unexpected exception", exc_info=exc)
    text = str(exc)
    return Failure(
        f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
        step,
        {"exception": type(exc).__name__},
    )


def _without_prefix(reason: str, flow: str, step: str) -> str:
    # some causes already say where they happened; the run's failure names the step on its own
    prefix = f"flow '{flow}', step '{step}': "
    return reason[len(prefix) :] if reason.startswith(prefix) else reason
