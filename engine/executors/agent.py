"""agent blocks: a ReAct loop over the block's tools and delegates (engine/agents).

`prepare(block, where)` serves agents without delegates (the executor registry's path); the
compiler wires agents that have delegates itself (engine/compile/agent.py), because resolving a
delegate needs the flow's bundle and steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.agents import AgentExecutor, AgentPlan, Delegate
from engine.nodes.call import Executor
from engine.nodes.errors import InternalError
from engine.spec import AgentBlock


def prepare(
    block: AgentBlock,
    where: str,
    delegates: Sequence[Delegate] = (),
    *,
    flow: str = "",
    depth: int = 0,
) -> Executor:
    return agent_executor(block, where, delegates, flow=flow, depth=depth)


def agent_executor(
    block: AgentBlock,
    where: str,
    delegates: Sequence[Delegate] = (),
    *,
    flow: str = "",
    depth: int = 0,
) -> AgentExecutor:
    """`prepare`, typed as what it makes: the compiler asks an agent whether it may wait for a person
    (`AgentExecutor.pauses`), which the registry's `Executor` does not say."""
    if block.delegates and not delegates:
        raise InternalError(
            f"bug: {where}: agent block '{block.block}' has delegates, which only the compiler wires "
            "(engine/compile/agent.py)"
        )
    plan = AgentPlan(
        flow=flow,
        where=where,
        block=block,
        tools=tuple(dict.fromkeys(block.tools)),
        delegates=tuple(delegates),
        depth=depth,
    )
    return AgentExecutor(plan)
