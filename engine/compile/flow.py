"""compile_flow: a pinned Bundle -> a runnable LangGraph graph (a CompiledFlow, engine/compile/compiled.py)."""

from __future__ import annotations

from typing import Any

from engine.compile.builder import Compiler, GraphBuilder
from engine.compile.compiled import REPLY_NODE, CompiledFlow
from engine.compile.constructs import construct
from engine.compile.direct import direct
from engine.compile.limits import recursion_limit
from engine.definitions.pinned import Bundle


def compile_flow(
    bundle: Bundle, *, checkpointer: Any = None, store: Any = None, inline: bool = False
) -> CompiledFlow:
    """Compile a pinned flow that validated (the compiler trusts it: what the validator refuses is
    not checked again here; CompileError only when this installation lacks what the flow needs).
    `inline`: for the engine's runs (which give the graph a `RunContext`, with a journal when steps
    are checkpointed), steps may run one after another in one LangGraph node (engine/compile/inline.py)."""
    return _compile(bundle, "", checkpointer, store, inline)


def compile_subflow(bundle: Bundle, *, prefix: str, inline: bool = False) -> CompiledFlow:
    """A subflow's graph: it inherits the parent's checkpointer and store when invoked in a node."""
    return _compile(bundle, prefix, None, None, inline)


def _compile(
    bundle: Bundle, prefix: str, checkpointer: Any, store: Any, inline: bool
) -> CompiledFlow:
    flow = bundle.flow
    builder = GraphBuilder(bundle, prefix, COMPILER, inline=inline)
    entries = builder.build_root(flow.steps)
    # a run of a graph whose every node runs inline needs no LangGraph loop (engine/compile/direct.py)
    talks = any(block.kind == "agent" for block in bundle.blocks.values())
    plan = direct(builder.inline, builder.nodes, entries, talks=talks)
    if not prefix:
        builder.graph.add_node(REPLY_NODE, _reply)
    graph = builder.graph.compile(checkpointer=checkpointer, store=store, name=flow.flow)
    return CompiledFlow(graph, bundle, recursion_limit(flow), direct=plan)


async def _reply(state: Any) -> None:
    """Never runs: it only names who wrote a thread turn's reply (see REPLY_NODE)."""
    return None


def _subflow(bundle: Bundle, prefix: str, inline: bool) -> CompiledFlow:
    return compile_subflow(bundle, prefix=prefix, inline=inline)


COMPILER = Compiler(construct=construct, subflow=_subflow)
