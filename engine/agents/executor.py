"""Running an agent block: render its prompt, offer its tools and delegates, run the loop.

An AgentExecutor is the block's executor (an `Executor`, engine/nodes/call.py): it returns the
final answer as the block's raw outputs (the step checks them like any block's) and appends the
conversation — the user prompt, every reply, every tool result — to the call's transcript, which
the step writes to the run's `messages`.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.runnables import RunnableConfig

from engine.agents import transcript
from engine.agents.answer import answer_function
from engine.agents.graph import compile_graph, recursion_limit
from engine.agents.plan import AgentFailed, AgentPlan, AgentRun
from engine.core.values import JsonDict
from engine.models.agentic import function_tool
from engine.nodes import history
from engine.nodes.call import BlockCall
from engine.nodes.errors import Problem
from engine.nodes.scope import render_prompt

_RETURNS = "Returns {}."
# A loop that cannot wait for a person runs without checkpoints (see engine/agents/graph.py). A graph
# invoked inside a node inherits the run's durability; with "sync" and no checkpointer LangGraph 1.2
# awaits a checkpoint future it never created (AttributeError), so such a loop states its own mode,
# through the config key LangGraph reads it from (passing `durability=` instead warns that it has no
# effect). A loop that may wait keeps the run's checkpointer and durability.
_NO_CHECKPOINTS = {"__pregel_durability": "exit"}


class AgentExecutor:
    """The executor of one agent (a block at a step, or a sub-agent), compiled once."""

    def __init__(self, plan: AgentPlan) -> None:
        # its outputs (BY358) and the names it is offered (BY441, BY442) are validated
        block = plan.block
        self.plan = plan
        self.graph = compile_graph(plan)
        self.limit = recursion_limit(plan)
        self.config: RunnableConfig = {"recursion_limit": self.limit}
        if not plan.pauses:
            self.config["configurable"] = _NO_CHECKPOINTS
        self.answer = answer_function(block.outputs)
        self.delegate_tools = tuple(
            function_tool(d.name, d.description, d.parameters) for d in plan.delegates
        )

    @property
    def pauses(self) -> bool:
        """Whether a run may wait for a person inside this agent (engine/compile/uses.py keeps its
        step a node of its own)."""
        return self.plan.pauses

    async def __call__(self, call: BlockCall) -> JsonDict:
        plan = self.plan
        block = plan.block
        system = render_prompt("prompt.system", block.prompt.system, call.inputs)
        user = render_prompt("prompt.user", block.prompt.user, call.inputs)
        if user is None:
            user = "Inputs:\n" + json.dumps(call.inputs, ensure_ascii=False, default=str)
        offered = (*await self._tools(call), *self.delegate_tools, self.answer)
        run = AgentRun(plan, call, call.context.models.agent_for_block(block), offered, self.answer)
        said = history.for_call(call)  # a thread's turn: the conversation so far, before the prompt
        start = {
            "messages": transcript.prompt(system, user, said),
            "turn": 0,
            "errors": 0,
            "pending": [],
            "answer": None,
        }
        try:
            final = await self.graph.ainvoke(start, self.config, context=run)
        finally:  # recovered from or not, a failed tool call is part of the step's record
            if run.failures:
                call.report["tool_errors"] = list(run.failures)
        answer = final.get("answer")
        if answer is None:  # the loop ends only with an answer or an error; this is a safety net
            raise AgentFailed(f"agent '{block.block}' ended without a final answer")
        if call.transcript is not None:
            call.transcript.extend(m for m in final.get("messages", []) if transcript.own(m))
        return dict(answer)

    async def _tools(self, call: BlockCall) -> list[JsonDict]:
        """The block's tools as functions, described by the run's registry (MCP servers on first use)."""
        source = call.context.tools
        lookup = getattr(source, "aget", None)
        found: list[JsonDict] = []
        for name in self.plan.tools:
            tool = await lookup(name) if lookup is not None else source.get(name)
            if tool is None:
                known: list[str] = getattr(call.context.tools, "names", lambda: [])()
                raise Problem(
                    f"tool '{name}' is not registered in this yard (known: {', '.join(known) or 'none'})"
                )
            found.append(function_tool(tool.name, tool.description, tool.parameters))
        return found


def describe_outputs(outputs: dict[str, Any]) -> str:
    """'Returns findings (string), sources (array).' for a delegate's description."""
    parts = [f"{name} ({getattr(spec, 'type', 'any')})" for name, spec in outputs.items()]
    return _RETURNS.format(", ".join(parts)) if parts else ""
