"""A compiled flow: the LangGraph graph of a pinned Bundle plus what a runtime needs around it
(its initial state, its outputs, its step limit, its drawings)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph

from engine.compile.direct import Direct
from engine.compile.reduce import empty
from engine.core.diagnostics import did_you_mean
from engine.core.errors import BlockyardError, RunError
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.nodes.context import RunContext
from engine.spec.typecheck import coerce_inputs
from engine.spec.walk import accumulated

# A node no edge leads to: conversation threads record a turn's reply "as" this node
# (`graph.aupdate_state(config, {"messages": [...]}, as_node=REPLY_NODE)`), which triggers nothing.
REPLY_NODE = ".reply"


@dataclass
class CompiledFlow:
    """A flow compiled for running: the graph, the bundle it came from and its step limit.

    Run it with `graph.astream(flow.initial_state(inputs), {"recursion_limit": flow.recursion_limit,
    "configurable": {"thread_id": ...}}, context=RunContext(...), stream_mode=["custom", "updates"],
    subgraphs=True)`; the final state's `flow.outputs(state)` is the run's result.
    """

    graph: CompiledStateGraph[Any, Any, Any, Any]
    bundle: Bundle
    recursion_limit: int
    # how a run may go without LangGraph's loop (engine/compile/direct.py; which runs do:
    # engine/runtime/direct_runs.py); None when the graph needs the loop
    direct: Direct | None = None
    name: str = field(init=False)
    # context keys steps accumulate -> append | merge
    accumulated: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.bundle.name
        self.accumulated = accumulated(self.bundle.flow.steps)

    def initial_state(self, inputs: JsonDict) -> dict[str, Any]:
        """The state a run starts from; InputError for unknown, missing or mistyped inputs. Keys that
        steps accumulate (`reduce:`) start out empty."""
        values = coerce_inputs(self.bundle.flow.inputs, inputs, where=f"flow '{self.name}'")
        return {
            "inputs": values,
            "context": empty(self.accumulated),
            "messages": [],
            "results": [],
            "loops": {},
        }

    def outputs(self, state: dict[str, Any]) -> JsonDict:
        """The flow's `outputs` keys from the final context; RunError naming a missing required one.
        An optional output the run did not write is left out, or takes its `default`."""
        context = state.get("context") or {}
        flow = self.bundle.flow
        missing = [key for key in flow.outputs if key not in context and flow.output(key).required]
        if missing:
            hints = "".join(did_you_mean(key, context) for key in missing[:1])
            raise RunError(
                f"flow '{self.name}' finished without output{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(k) for k in missing)}{hints} (the context has "
                f"{', '.join(repr(k) for k in sorted(context)) or 'no keys'})"
            )
        result: JsonDict = {}
        for key in flow.outputs:
            if key in context:
                result[key] = context[key]
            elif flow.output(key).has_default:
                result[key] = copy.deepcopy(flow.output(key).default)
        return result

    async def run_nested(self, inputs: JsonDict, context: RunContext) -> JsonDict:
        """Run as part of a running flow (a `flow:` step, or a flow an agent delegates to), inside the
        node that calls it, on that run's context (models, tools, memory, workspace) and with this
        flow's own step limit; returns its outputs.

        The context is passed explicitly: a graph invoked in a node otherwise gets the runtime
        context of whatever graph runs that node, and an agent's loop runs as a graph of its own,
        whose context is the agent's execution (engine/agents), not the run's.
        """
        final = await self.graph.ainvoke(
            self.initial_state(inputs), {"recursion_limit": self.recursion_limit}, context=context
        )
        return self.outputs(final)

    def config(self, thread_id: str, **configurable: Any) -> RunnableConfig:
        """A run config with this flow's recursion limit."""
        return {
            "recursion_limit": self.recursion_limit,
            "configurable": {"thread_id": thread_id, **configurable},
        }

    def explain(self, exc: BaseException) -> BlockyardError:
        """A run failure as one clear error: StepFailed and our errors as they are, LangGraph's
        step limit in words, anything else named with the flow."""
        if isinstance(exc, BlockyardError):
            return exc
        if isinstance(exc, GraphRecursionError):
            return RunError(
                f"flow '{self.name}' went over its limit of {self.recursion_limit} steps (derived from "
                "its loop, foreach and max_visits bounds); raise it with `max_steps:` on the flow"
            )
        return RunError(f"flow '{self.name}': {type(exc).__name__}: {exc}")

    def drawing(self, fmt: str) -> str:
        """The flow's structure as `mermaid`, `dot` or `json` (engine/compile/draw.py)."""
        # the graph model and its renderers: only a drawing loads them
        from engine.compile.draw import draw

        return draw(self.bundle, fmt)

    def mermaid(self) -> str:
        """The flow's structure as a Mermaid flowchart."""
        return self.drawing("mermaid")

    def dot(self) -> str:
        """The flow's structure as Graphviz DOT."""
        return self.drawing("dot")
