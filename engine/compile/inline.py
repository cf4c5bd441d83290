"""Steps run one after another inside one LangGraph node, for runs without checkpoints.

A run with durability `none` keeps no checkpoint between steps, so nothing needs LangGraph to end
a step before the next begins; what it costs is LangGraph's own work per step (a superstep: tasks
prepared, writes applied, channels versioned), which on a chain of short steps is more than the
steps themselves. In a graph compiled for such runs (`compile_flow(..., inline=True)`), the node
of a step hands its update on to the step that follows, in the same node, as long as

- the graph never runs two of its nodes in one superstep (no region with parallel branches or a
  barrier join, `Plan.parallel`): then one node at a time sees the state, and a step run inline
  sees exactly the state it would have seen as a node of its own;
- the step goes on to exactly one node that may run inline: a `uses` step, a router, a loop's or a
  foreach's start and check, a map's fan-out and join; never a node with a retry policy (LangGraph
  would retry the whole node), an approval gate, a `max_visits` guard (so every cycle of the graph
  still passes a superstep) or a subflow;
- a map's fan-out runs the items of a `uses:` map (without a retry policy) itself, all at once as
  LangGraph runs the tasks of one step, then goes on to the join; a map with a `steps:` body sends
  its items to their node;
- the update wrote no `messages`: their reducer replaces a message by id, so the messages of two
  steps combined into one update would not always come out as two updates one after the other.

The node returns what the steps wrote, combined as LangGraph's reducers would have applied them
one by one, and routes to where the last of them goes. Events, the trace, `results` and outputs
are those of the same run step by step (tests/compile/test_compile_run_inline.py compares them). A flow with
`max_steps` is never run inline: its limit counts LangGraph steps. Every node of such a graph
routes itself with `Command(goto=...)` instead of static edges, so that it can go on inline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from engine.compile.state import applied, combined
from engine.nodes.context import RunContext

NodeFn = Callable[[Any, Runtime[RunContext]], Awaitable[Any]]
YIELD_EVERY = 32  # steps run inline between two chances for the event loop (a cancellation) to get in


class Inline:
    """The nodes of one graph that may run inside another's node, and where those that do not
    route themselves go (their static edges, had the graph had checkpoints)."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeFn] = {}
        self.next: dict[str, list[str]] = {}
        self.items: dict[str, NodeFn] = {}  # a map's item node: run by the node that sends to it
        self.parallel = False  # set while building: a region where two nodes may run at once

    def add(self, name: str, node: NodeFn) -> Callable[..., Any]:
        """The node to register for `node`: it runs the steps that follow it inline when it can."""
        self.nodes[name] = node
        return _Runner(self, name)

    def routes(self, name: str) -> bool:
        """Whether node `name` routes itself in this graph (it may run inline)."""
        return name in self.nodes

    def then(self, name: str, targets: list[str]) -> None:
        """Where node `name` goes when its step returns a plain update."""
        self.next[name] = targets

    def add_items(self, name: str, node: NodeFn, then: list[str]) -> None:
        """A map's item node (it stays a node of its own, for `Send`s from a graph with parallel
        branches): a node of this graph that sends to it runs its items itself, all at once, then
        goes on to `then` (the map's join)."""
        self.items[name] = node
        self.next[name] = then


class _Runner:
    """A node of an inline graph: its step, then (in a graph without parallel branches) the steps
    it leads to, while each leads to exactly one node that may run inline."""

    __slots__ = ("inline", "name")

    def __init__(self, inline: Inline, name: str) -> None:
        self.inline = inline
        self.name = name

    async def __call__(self, state: Any, runtime: Runtime[RunContext]) -> Any:
        inline = self.inline
        name = self.name
        total: dict[str, Any] = {}
        ran = 0
        while True:
            update, goto = _split(await inline.nodes[name](state, runtime), inline.next.get(name, []))
            total = combined(total, update)
            if inline.parallel or "messages" in update:
                return Command(update=total, goto=goto)
            state = applied(state, update)
            items = _items(goto, inline.items)
            if items is not None:  # a map's fan-out: its items here, as LangGraph runs them (all at once)
                for done in await _all(inline.items[items], [send.arg for send in goto if isinstance(send, Send)],
                                       runtime):
                    total = combined(total, done)
                    state = applied(state, done)
                goto = list(inline.next[items])
            following = _single(goto)
            if following is None or following not in inline.nodes:
                return Command(update=total, goto=goto)
            name = following
            ran += 1
            if ran % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a long chain still lets a cancellation (Ctrl-C, a client) in


# resolved once here instead of at every add_node (LangGraph reads the node's annotations)
_Runner.__call__.__annotations__ = {"state": Any, "runtime": Runtime[RunContext], "return": Any}


def _split(result: Any, static: list[str]) -> tuple[Mapping[str, Any], list[str | Send]]:
    """(update, goto) of what a node returned: a Command routes itself; a plain update goes where
    the node's edges would have taken it."""
    if isinstance(result, Command):
        goto = result.goto
        targets: list[str | Send] = [goto] if isinstance(goto, str | Send) else list(goto)
        update = result.update
        return (update if isinstance(update, Mapping) else {}), targets
    return (result if isinstance(result, Mapping) else {}), list(static)


def _items(goto: list[str | Send], items: Mapping[str, NodeFn]) -> str | None:
    """The item node of a map's fan-out, when `goto` is one (only `Send`s, to one item node)."""
    nodes = {send.node if isinstance(send, Send) else None for send in goto}
    if len(nodes) == 1:
        (node,) = nodes
        if node is not None and node in items:
            return node
    return None


async def _all(node: NodeFn, args: list[Any], runtime: Runtime[RunContext]) -> list[Mapping[str, Any]]:
    """The updates of a map's items, run at once as LangGraph runs the tasks of one step: the first
    failure fails them all (the others are cancelled, and awaited, before it is raised)."""
    tasks = [asyncio.ensure_future(node(arg, runtime)) for arg in args]
    try:
        done = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [update if isinstance(update, Mapping) else {} for update in done]


def _single(goto: list[str | Send]) -> str | None:
    if len(goto) == 1 and isinstance(goto[0], str):
        return goto[0]
    return None
