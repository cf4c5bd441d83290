"""One generic executor per block kind: a block is data, its kind's executor runs it.

`prepare(block, where)` checks the block once, at compile time, and returns an `Executor`: an async
function from a `BlockCall` (the bound, type-checked inputs plus run services) to the block's raw
outputs. The step node around it checks the outputs, emits events and handles failures.
Agent and smart blocks are usually wired by the compiler (engine/compile/agent.py: delegates,
compiled programs); the entries here serve them when there is nothing to wire.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from engine.nodes.call import BlockCall, Executor
from engine.spec import BlockSpec

# what every module of EXECUTORS has as `prepare`: it takes the model of its kinds (a ToolBlock, an
# LlmBlock | DecideBlock: engine/spec/block.py), so that a kind's keys are there by type; `prepare` below
# hands it a block of those kinds only (tests/test_registries.py checks each member's parameter)
Preparer = Callable[[Any, str], Executor]

# a block kind -> its executor's module in engine/executors, imported the first time a flow has such a
# block: a cold `blockyard run` of llm and transform blocks loads neither the agents package nor the
# smart blocks' glue (tests/runtime/test_cold_start.py)
EXECUTORS: dict[str, str] = {
    "transform": "transform",
    "tool": "tool",
    "wait": "wait",
    "llm": "model",
    "decide": "model",
    "memory_read": "memory",
    "memory_write": "memory",
    "agent": "agent",
    "smart": "smart",
}

if TYPE_CHECKING:
    # every member, imported for the checks only: import-linter sees each edge, mypy checks each
    # `prepare` against Preparer (tests/test_registries.py keeps this list in step with EXECUTORS; docs/architecture.md)
    from engine.executors import agent, memory, model, smart, tool, transform, wait

    _MEMBERS: tuple[Preparer, ...] = (
        transform.prepare,
        tool.prepare,
        wait.prepare,
        model.prepare,
        memory.prepare,
        agent.prepare,
        smart.prepare,
    )

__all__ = ["EXECUTORS", "BlockCall", "Executor", "prepare"]


def prepare(block: BlockSpec, where: str) -> Executor:
    """The executor of a validated `block` (`where` names the step, for messages)."""
    # every kind has its module (tests/test_registries.py), and the block's model is its kind's
    preparer: Preparer = import_module(f"engine.executors.{EXECUTORS[block.kind]}").prepare
    return preparer(block, where)
