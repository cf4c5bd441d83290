"""tool blocks: call one registered tool with the block's inputs as arguments (no model)."""

from __future__ import annotations

from typing import Any

from engine.nodes.call import BlockCall, Executor
from engine.nodes.events import TOOL_CALL, emit
from engine.spec import ToolBlock


def prepare(block: ToolBlock, where: str) -> Executor:
    name = block.tool
    outputs = list(block.outputs)

    async def run(call: BlockCall) -> Any:
        emit(
            call.writer,
            TOOL_CALL,
            call.label,
            {"tool": name, "args": call.inputs, "block": block.block},
            call.index,
        )
        result = await call.context.tools.call(name, call.inputs)
        return shape(result, outputs)

    return run


def shape(result: Any, outputs: list[str]) -> Any:
    """A tool's return value as the block's outputs: a dict with exactly the output keys is taken
    as is; with exactly one declared output any other value is that output; with none it is ignored."""
    if isinstance(result, dict) and set(result) == set(outputs):
        return result
    if len(outputs) == 1:
        return {outputs[0]: result}
    if not outputs:
        return {}
    return result
