"""compile_flow: a pinned Bundle -> a runnable LangGraph graph (a CompiledFlow, engine/compile/compiled.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine.compile.builder import Compiler, GraphBuilder
from engine.compile.compiled import REPLY_NODE, CompiledFlow
from engine.compile.constructs import construct
from engine.compile.limits import recursion_limit
from engine.nodes.errors import CompileError
from engine.pinned import Bundle
from engine.spec.walk import walk_steps


def compile_flow(bundle: Bundle, *, checkpointer: Any = None, store: Any = None) -> CompiledFlow:
    """Compile a pinned flow; CompileError names the flow and step of anything that cannot run."""
    return _compile(bundle, "", checkpointer, store)


def compile_subflow(bundle: Bundle, *, prefix: str) -> CompiledFlow:
    """A subflow's graph: it inherits the parent's checkpointer and store when invoked in a node."""
    return _compile(bundle, prefix, None, None)


def _compile(bundle: Bundle, prefix: str, checkpointer: Any, store: Any) -> CompiledFlow:
    flow = bundle.flow
    ids = Counter(walked.step.id for walked in walk_steps(flow.steps))
    twice = sorted(name for name, count in ids.items() if count > 1)
    if twice:
        raise CompileError(f"flow '{flow.flow}': step id{'s' if len(twice) > 1 else ''} "
                           f"{', '.join(repr(n) for n in twice)} used more than once")
    reserved = sorted(name for name in ids if name.startswith("__"))
    if reserved:
        raise CompileError(f"flow '{flow.flow}': step id '{reserved[0]}' is reserved (ids may not start with '__')")
    builder = GraphBuilder(bundle, prefix, COMPILER)
    builder.build_root(flow.steps)
    if not prefix:
        builder.graph.add_node(REPLY_NODE, _reply)
    graph = builder.graph.compile(checkpointer=checkpointer, store=store, name=flow.flow)
    return CompiledFlow(graph, bundle, recursion_limit(flow))


async def _reply(state: Any) -> None:
    """Never runs: it only names who wrote a thread turn's reply (see REPLY_NODE)."""
    return None


def _subflow(bundle: Bundle, prefix: str) -> CompiledFlow:
    return compile_subflow(bundle, prefix=prefix)


COMPILER = Compiler(construct=construct, subflow=_subflow)
