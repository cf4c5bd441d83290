"""What an executor receives for one execution of a block."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.core.values import JsonDict
from engine.spec import BlockSpec

if TYPE_CHECKING:
    from langgraph.types import StreamWriter

    from engine.nodes.context import RunContext


@dataclass(frozen=True)
class BlockCall:
    """One execution: `flow`/`step` as written in the flow that owns the step, `label` the step id
    shown in events (prefixed inside subflows), `index` the map/foreach item position if any."""

    flow: str
    step: str
    label: str
    block: BlockSpec
    inputs: JsonDict
    context: RunContext
    writer: StreamWriter
    index: int | None = None
    scope: Mapping[str, Any] | None = (
        None  # the step's template scope (agents bind delegated steps in it)
    )
    transcript: list[Any] | None = (
        None  # where an agent puts its conversation for the run's `messages`
    )
    # what the executor tells about this execution besides its outputs, for the step's step_finished or
    # step_failed event (an agent's failed tool calls: `tool_errors`)
    report: JsonDict = field(default_factory=dict)


Executor = Callable[[BlockCall], Awaitable[Any]]
