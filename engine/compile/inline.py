"""Steps run one after another inside one LangGraph node.

What a chain of short steps costs in LangGraph is LangGraph's own work per step (a superstep:
tasks prepared, writes applied, channels versioned, a checkpoint serialized and stored), more than
the steps themselves. In a graph compiled for the engine's runs (`compile_flow(..., inline=True)`),
the node of a step hands its update on to the step that follows, in the same node, as long as

- the graph never runs two of its nodes in one superstep (no region with parallel branches or a
  barrier join, `Plan.parallel`): then one node at a time sees the state, and a step run inline
  sees exactly the state it would have seen as a node of its own;
- the step goes on to exactly one node that may run inline: a `uses` step, a router, a loop's or a
  foreach's start and check, a map's fan-out and join; never an approval gate, a `max_visits`
  guard (so every cycle of the graph still passes a superstep), a subflow, or an agent that may
  wait for a person (`approve_tools`: its loop keeps checkpoints under its step's node);
- the update wrote no `messages`: their reducer replaces a message by id, so the messages of two
  steps combined into one update would not always come out as two updates one after the other.

A step's retry policy is applied here, step by step, as LangGraph applies it to a node (had the
node kept LangGraph's policy, a failure of the third step would run all three again).

A map's fan-out runs the items of a `uses:` map itself, all at once as LangGraph runs the tasks of
one step, then goes on to the join (a map with a body, or whose block may wait for a person, sends
its items to their node as LangGraph tasks). In a durable run (`RunContext.journal`), each step's
update is committed before the next step begins (engine/state/journal.py) — what LangGraph's
checkpoint would have kept — and a node that LangGraph runs again after a crash or a failure goes on
after the last step it committed. A map's fan-out's row holds what it sends; each item's row is
queued as the item finishes, with the item's trace rows, and committed with whatever is committed
next, as LangGraph queues a task's pending writes: a resume runs only the items that did not finish.

The node returns what the steps wrote, combined as LangGraph's reducers would have applied them
one by one, and routes to where the last of them goes. Events, the trace, `results` and outputs
are those of the same run step by step (tests/compile/test_compile_run_inline.py compares them). A flow with
`max_steps` is never run inline: its limit counts LangGraph steps. Every node of such a graph
routes itself with `Command(goto=...)` instead of static edges, so that it can go on inline.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command, RetryPolicy, Send

from engine.compile.state import applied, combined
from engine.nodes.context import INLINE_ITEM, RunContext, StepJournal
from engine.nodes.errors import InternalError

NodeFn = Callable[[Any, Runtime[RunContext]], Awaitable[Any]]
YIELD_EVERY = (
    32  # steps run inline between two chances for the event loop (a cancellation) to get in
)


class Inline:
    """The nodes of one graph that may run inside another's node, and where those that do not
    route themselves go (their static edges in a graph that runs steps one by one)."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeFn] = {}
        self.next: dict[str, list[str]] = {}
        self.items: dict[str, NodeFn] = {}  # a map's item node: run by the node that sends to it
        self.retry: dict[
            str, RetryPolicy
        ] = {}  # the retry policy of a node above or of an item node
        self.parallel = False  # set while building: a region where two nodes may run at once

    def add(self, name: str, node: NodeFn, retry: RetryPolicy | None = None) -> Callable[..., Any]:
        """The node to register for `node` (without a retry policy of LangGraph's: it retries its
        steps itself, `retry`): it runs the steps that follow it inline when it can."""
        self.nodes[name] = node
        if retry is not None:
            self.retry[name] = retry
        return self.runner(name)

    def runner(self, name: str) -> NodeFn:
        """What runs node `name` (added with `add`): its step, then those that follow it inline."""
        return _Runner(self, name)

    def routes(self, name: str) -> bool:
        """Whether node `name` routes itself in this graph (it may run inline)."""
        return name in self.nodes

    def then(self, name: str, targets: list[str]) -> None:
        """Where node `name` goes when its step returns a plain update."""
        self.next[name] = targets

    def fan_out(self, goto: list[str | Send]) -> Items | None:
        """The items of a map's fan-out that `goto` is, when their item node is one this graph's
        nodes run themselves (else None)."""
        node = _items(goto, self.items)
        if node is None:
            return None
        return Items(node, [send.arg for send in goto if isinstance(send, Send)], {})

    async def run_items(self, sent: Items, runtime: Runtime[RunContext]) -> list[Mapping[str, Any]]:
        """The updates of the items `sent`, in order, run as LangGraph runs the tasks of one step; they go
        on to `self.next[sent.node]` (the map's join)."""
        return await _all(
            self.items[sent.node], sent, runtime, self.retry.get(sent.node), None, "", 0
        )

    def add_items(
        self, name: str, node: NodeFn, then: list[str], retry: RetryPolicy | None = None
    ) -> None:
        """A map's item node (it stays a node of its own, for `Send`s from a graph with parallel
        branches, or in a run with checkpoints): a node of this graph that sends to it runs its items itself,
        all at once, then goes on to `then` (the map's join)."""
        self.items[name] = node
        self.next[name] = then
        if retry is not None:
            self.retry[name] = retry


class _Runner:
    """A node of an inline graph: its step, then (in a graph without parallel branches) the steps
    it leads to, while each leads to exactly one node that may run inline."""

    __slots__ = ("inline", "name")

    def __init__(self, inline: Inline, name: str) -> None:
        self.inline = inline
        self.name = name

    async def __call__(self, state: Any, runtime: Runtime[RunContext]) -> Any:
        journal = runtime.context.journal
        if journal is None:
            return await self._steps(state, runtime, None, "", self.name, {}, 0)
        # a run with checkpoints: what each step finishes is kept before the next begins
        info = runtime.execution_info
        ns = info.checkpoint_ns if info is not None else ""
        name, ran = self.name, 0
        total: dict[str, Any] = {}
        done = await journal.restore(ns)
        resumed: Items | None = None
        if done is not None:  # this node ran before and stopped: it goes on after what it finished
            for update in done.updates:
                total = combined(total, update)
                state = applied(state, update)
            name, ran = done.following, done.seq
            if done.items is not None:  # it stopped inside a map's items: the others run now
                resumed = Items(name, done.items, done.items_done)
            if name not in (self.inline.items if resumed is not None else self.inline.nodes):
                raise InternalError(
                    f"bug: a resumed node goes on to '{name}', which is not a node of its graph"
                )
        try:
            return await self._steps(state, runtime, journal, ns, name, total, ran, resumed)
        except BaseException:
            journal.stopped()  # `exit`: what the node finished, written as LangGraph writes the run's stop
            raise

    async def _steps(
        self,
        state: Any,
        runtime: Runtime[RunContext],
        journal: StepJournal | None,
        ns: str,
        name: str,
        total: dict[str, Any],
        ran: int,
        resumed: Items | None = None,
    ) -> Command[Any]:
        """Step `name` and those it leads to, on `state`, after steps that wrote `total`; `ran` is
        the number of the journal row step `name` writes. `resumed`: the node stopped inside a map's
        items (`name` is the item node), which go on first."""
        inline = self.inline
        while True:
            if resumed is not None:
                sent, resumed = resumed, None
            else:
                update, goto = split(
                    await _attempts(inline.nodes[name], state, runtime, inline.retry.get(name)),
                    inline.next.get(name, []),
                )
                total = combined(total, update)
                if inline.parallel or "messages" in update:
                    return await _end(journal, total, goto)
                state = applied(state, update)
                item_node = _items(goto, inline.items)
                sent = None
                if item_node is not None:
                    args = [send.arg for send in goto if isinstance(send, Send)]
                    sent = Items(item_node, args, {})
                    if journal is not None:  # the fan-out's row holds what it sends
                        await journal.finished(ns, ran, update, item_node, args)
            if sent is not None:
                # a map's fan-out: its items here, as LangGraph runs them (all at once); with a
                # journal each item's row is queued as it finishes, numbered after the fan-out's
                node = sent.node
                for done in await _all(
                    inline.items[node], sent, runtime, inline.retry.get(node), journal, ns, ran + 1
                ):
                    total = combined(total, done)
                    state = applied(state, done)
                goto, ran = list(inline.next[node]), ran + 1 + len(sent.args)
                following = single(goto)
                if following is None or following not in inline.nodes:
                    return await _end(journal, total, goto)
                name = following  # the map's join (its items' rows stand for the step before it)
                continue
            following = single(goto)
            if following is None or following not in inline.nodes:
                return await _end(journal, total, goto)
            if journal is not None:
                await journal.finished(ns, ran, update, following)
            name = following
            ran += 1
            if ran % YIELD_EVERY == 0:
                # a long chain still lets a cancellation (Ctrl-C, a client) in
                await asyncio.sleep(0)


# resolved once here instead of at every add_node (LangGraph reads the node's annotations)
_Runner.__call__.__annotations__ = {"state": Any, "runtime": Runtime[RunContext], "return": Any}


async def _end(
    journal: StepJournal | None, total: dict[str, Any], goto: list[str | Send]
) -> Command[Any]:
    if journal is not None:
        await journal.settle()  # `async`: the last step's row, committed while this one ran
    return Command(update=total, goto=goto)


async def _attempts(
    node: NodeFn, arg: Any, runtime: Runtime[RunContext], policy: RetryPolicy | None
) -> Any:
    """`node` run on `arg`, again while `policy` says a failure is worth another attempt: what
    LangGraph does for a node with a retry policy (the attempt number in the runtime's execution
    info, the same intervals), for a step that runs inside another's node."""
    if policy is None:
        return await node(arg, runtime)
    failed = 0
    while True:
        try:
            return await node(arg, runtime if failed == 0 else _attempt(runtime, failed + 1))
        except GraphBubbleUp:
            raise
        except Exception as exc:
            if not _retries(policy, exc):
                raise
            failed += 1
            if failed >= policy.max_attempts:
                raise
            interval = min(
                policy.max_interval, policy.initial_interval * policy.backoff_factor ** (failed - 1)
            )
            await asyncio.sleep(interval + random.uniform(0, 1) if policy.jitter else interval)


def _attempt(runtime: Runtime[RunContext], number: int) -> Runtime[RunContext]:
    info = runtime.execution_info
    return runtime.patch_execution_info(node_attempt=number) if info is not None else runtime


def _retries(policy: RetryPolicy, exc: Exception) -> bool:
    retry_on = policy.retry_on
    if isinstance(retry_on, Sequence):
        return isinstance(exc, tuple(retry_on))
    if isinstance(retry_on, type):
        return isinstance(exc, retry_on)
    return bool(retry_on(exc))


def split(result: Any, static: list[str]) -> tuple[Mapping[str, Any], list[str | Send]]:
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


@dataclass(frozen=True)
class Items:
    """What a map's fan-out sent to its item node: one argument per item, in order, and the updates of
    the items that finished already (a resumed node's), by position."""

    node: str
    args: list[Any]
    done: Mapping[int, Mapping[str, Any]]


async def _all(
    node: NodeFn,
    sent: Items,
    runtime: Runtime[RunContext],
    policy: RetryPolicy | None,
    journal: StepJournal | None,
    ns: str,
    first: int,
) -> list[Mapping[str, Any]]:
    """The updates of a map's items in order, run at once as LangGraph runs the tasks of one step
    (each retried on its own, as its task would be), but those done already: the first failure fails
    them all (the others are cancelled, and awaited, before it is raised). With a journal each item's
    update is its row, number `first` + its position, queued as the item finishes."""

    async def item(position: int, arg: Any) -> Mapping[str, Any]:
        INLINE_ITEM.set(position)  # this task's own context: its trace rows are the item's
        result = await _attempts(node, arg, runtime, policy)
        update = result if isinstance(result, Mapping) else {}
        if journal is not None:
            journal.item_finished(ns, first + position, position, update)
        return update

    tasks = {
        position: asyncio.ensure_future(item(position, arg))
        for position, arg in enumerate(sent.args)
        if position not in sent.done
    }
    try:
        finished = await asyncio.gather(*tasks.values())
    except BaseException:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        raise
    ran = dict(zip(tasks, finished, strict=True))
    return [
        sent.done[position] if position in sent.done else ran[position]
        for position in range(len(sent.args))
    ]


def single(goto: list[str | Send]) -> str | None:
    if len(goto) == 1 and isinstance(goto[0], str):
        return goto[0]
    return None
