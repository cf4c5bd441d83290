"""Agent blocks: a ReAct loop over the block's tools, with sub-agents offered as tools.

An agent renders its prompt, then lets the model take turns: each turn the model calls tools —
several at once run in parallel — or gives its final answer by calling `final_answer`, whose
parameters are the block's outputs. Delegates (other agent blocks, agent steps of the flow, or
whole flows) are offered as tools too and run as nodes of the agent's own LangGraph graph, so
several sub-agents asked for in one turn fan out in parallel. Failed tool calls go back to the
model as error results, up to a limit; `max_iterations` bounds the turns, the last of which
must give the answer. Compile-time wiring (which delegates, resolved how) is in
engine/compile/agent.py.
"""

from __future__ import annotations

from engine.agents.executor import AgentExecutor
from engine.agents.plan import (
    MAX_TOOL_ERRORS,
    AgentFailed,
    AgentPlan,
    AgentRun,
    Delegate,
)
from engine.spec.block import ANSWER_TOOL, DEFAULT_MAX_ITERATIONS

__all__ = [
    "ANSWER_TOOL",
    "DEFAULT_MAX_ITERATIONS",
    "MAX_TOOL_ERRORS",
    "AgentExecutor",
    "AgentFailed",
    "AgentPlan",
    "AgentRun",
    "Delegate",
]
