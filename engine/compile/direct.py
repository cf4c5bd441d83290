"""Running a graph whose every node runs inline without LangGraph's loop.

In a graph compiled for the engine's runs, a node runs the steps that follow it itself
(engine/compile/inline.py). When every node of the graph may do so and no two of them ever run in
one superstep, a run of the graph is a chain of node calls: the entry node runs every step it can,
and returns only at the end of the flow, or after a step that wrote `messages` (whose reducer must
see each update on its own), naming the one node that goes on (or a map's items to run first).
LangGraph's loop then adds nothing but its own fixed cost per run — its channels, tasks, a
superstep, the stream, and in a durable run checkpoints that the steps' rows make redundant — which
was about half of what a short flow cost (docs/performance.md). Which executions use the plan:
engine/runtime/direct_runs.py.

`Direct.run` calls the nodes as LangGraph would (the state as its reducers leave it, a `Runtime` with
the run's context, stream writer and execution info, the config LangGraph would give the node,
LangGraph's step limit), and returns the final state. Events, `results`, outputs and failures are
those of the same run through LangGraph (tests/compile/test_direct.py compares them over generated
flows, failures, retries, messages and the step limit; tests/runtime/test_durability.py runs the
example flows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.errors import ErrorCode, GraphRecursionError, create_error_message
from langgraph.graph import END
from langgraph.runtime import ExecutionInfo, Runtime
from langgraph.types import Send

from engine.compile.inline import Inline, single, split
from engine.compile.state import applied
from engine.nodes.context import RunContext
from engine.nodes.errors import InternalError

TASK = "direct-"  # a task's id: this and the task's number in the run (LangGraph's are hashes)


@dataclass(frozen=True)
class Direct:
    """A graph that may run without LangGraph's loop: its entry node, and its nodes (each runs inline)
    with what they run (`inline`: a map's items a node sends after a step that wrote `messages`).
    `durable`: no step of it can write `messages` (no agent block), so its entry node runs every step
    of a run, and a run with checkpoints may go without LangGraph too (engine/runtime/direct_runs.py)."""

    entry: str
    inline: Inline
    durable: bool = False

    async def run(
        self,
        state: Mapping[str, Any],
        context: RunContext,
        write: Callable[[Any], None],
        recursion_limit: int,
        config: RunnableConfig | None = None,
    ) -> dict[str, Any]:
        """The final state of a run from `state` (a run's initial state): node after node, each one
        LangGraph superstep (a map's items that a node sends, as LangGraph's tasks, one more), until
        one goes to the end; GraphRecursionError past `recursion_limit` supersteps, as LangGraph
        raises it. Each node runs with `config` as the config LangGraph would give it (its task's
        namespace added): a graph it invokes finds the run's stream writer there, and the trace rows
        of a durable run's map items their task (engine/state/durable.py, `running_task`).

        A task's namespace is its node's name and its number in the run, the same when a durable run
        goes on after a crash (its steps' rows are kept under it: engine/state/journal.py)."""
        values = dict(state)
        goto: list[str | Send] = [self.entry]
        # LangGraph's supersteps: its start node's (0), one per node call (or a map's items), then
        # one that finds nothing left to run; each checks the limit before it runs
        steps = 0
        while True:
            following = single(goto)
            if following == END:
                if steps + 1 > recursion_limit:
                    raise GraphRecursionError(_over(recursion_limit))
                return values
            steps += 1
            if steps > recursion_limit:
                raise GraphRecursionError(_over(recursion_limit))
            name = following if following is not None else "items"
            task = f"{TASK}{steps}"
            info = ExecutionInfo(
                checkpoint_id="",
                checkpoint_ns=f"{name}:{task}",
                task_id=task,
                node_first_attempt_time=time.time(),
            )
            if config is not None:
                configurable = {
                    **config.get("configurable", {}),
                    "checkpoint_ns": info.checkpoint_ns,
                }
                var_child_runnable_config.set(
                    cast("RunnableConfig", {**config, "configurable": configurable})
                )
            runtime: Runtime[RunContext] = Runtime(
                context=context, stream_writer=write, execution_info=info
            )
            if following is not None and following in self.inline.nodes:
                node = self.inline.runner(following)
                update, goto = split(await node(values, runtime), [])
                values = applied(values, update)
                continue
            sent = self.inline.fan_out(goto)
            if sent is None:
                raise InternalError(f"bug: a graph run without LangGraph goes to {goto!r}")
            for done in await self.inline.run_items(sent, runtime):
                values = applied(values, done)
            goto = list(self.inline.next[sent.node])


def _over(recursion_limit: int) -> str:
    """LangGraph's own message for a run over its step limit (the compiled flow explains it)."""
    return create_error_message(
        message=(
            f"Recursion limit of {recursion_limit} reached without hitting a stop condition. "
            "You can increase the limit by setting the `recursion_limit` config key."
        ),
        error_code=ErrorCode.GRAPH_RECURSION_LIMIT,
    )


def direct(
    inline: Inline | None, nodes: set[str], entries: list[str], *, talks: bool
) -> Direct | None:
    """The plan to run a graph without LangGraph's loop, when it may be: an inline graph without
    parallel branches, one entry, and every node one that runs inline (or a map's item node, which
    the node before it runs). `talks`: a step of it may write `messages` (an agent block)."""
    if inline is None or inline.parallel or len(entries) != 1:
        return None
    if any(node not in inline.nodes and node not in inline.items for node in nodes):
        return None
    return Direct(entries[0], inline, durable=not talks)
