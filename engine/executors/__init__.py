"""One generic executor per block kind: a block is data, its kind's executor runs it.

`prepare(block, where)` checks the block once, at compile time, and returns an `Executor`: an async
function from a `BlockCall` (the bound, type-checked inputs plus run services) to the block's raw
outputs. The step node around it checks the outputs, emits events and handles failures.
Agent and smart blocks are usually wired by the compiler (engine/compile/agent.py: delegates,
compiled programs); the entries here serve them when there is nothing to wire.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.executors import agent, memory, model, smart, tool, transform, wait
from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import internal
from engine.spec import BlockSpec

Preparer = Callable[[BlockSpec, str], Executor]

EXECUTORS: dict[str, Preparer] = {
    "transform": transform.prepare,
    "tool": tool.prepare,
    "wait": wait.prepare,
    "llm": model.prepare,
    "decide": model.prepare,
    "memory_read": memory.prepare,
    "memory_write": memory.prepare,
    "agent": agent.prepare,
    "smart": smart.prepare,
}

__all__ = ["EXECUTORS", "BlockCall", "Executor", "prepare"]


def prepare(block: BlockSpec, where: str) -> Executor:
    """The executor of a validated `block` (`where` names the step, for messages)."""
    preparer = EXECUTORS.get(block.kind)
    if preparer is None:
        raise internal(f"{where}: block '{block.block}' of unknown kind '{block.kind}'", "BY105")
    return preparer(block, where)
