"""Listening to a running graph: its state after each superstep, and the events its nodes write.

LangGraph's custom stream mode hands every event to the event loop with `call_soon_threadsafe`
(a self-pipe write and one more wake-up of the loop per event): about a fifth of the time of a
short step (bench/bench_overhead.py). Our nodes run on the loop itself, so they get a plain
function instead. LangGraph gives nodes the stream writer of a parent runtime when the config
carries a parent stream (that is how subgraphs inherit theirs); we use that path with our own
writer. It relies on two private config keys, so `direct_supported()` checks once per process
that it still works, and we fall back to the custom stream mode when it does not.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypedDict, cast

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.pregel.protocol import StreamProtocol
from langgraph.runtime import Runtime
from langgraph.types import Durability

try:  # private to LangGraph: `direct_supported()` checks that the path still works
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME, CONFIG_KEY_STREAM
# pragma: no cover - moved in some LangGraph version: the custom stream mode it is
except ImportError:
    PRIVATE_KEYS: tuple[str, str] | None = None
else:
    PRIVATE_KEYS = (CONFIG_KEY_STREAM, CONFIG_KEY_RUNTIME)

from engine.compile.direct import Direct
from engine.state import fencing
from engine.state import synchronous as commit_levels
from engine.templates.limits import TemplateLimits, set_limits

_direct: bool | None = None  # does the private path work with this LangGraph? (probed once)


def _direct_config(config: dict[str, Any], write: Any) -> RunnableConfig | None:
    if PRIVATE_KEYS is None:
        return None
    stream_key, runtime_key = PRIVATE_KEYS
    configurable = {
        **config.get("configurable", {}),
        stream_key: StreamProtocol(_ignore, set()),
        runtime_key: Runtime(stream_writer=write),
    }
    # a TypedDict of optional keys
    return cast("RunnableConfig", {**config, "configurable": configurable})


def _ignore(_: Any) -> None:
    return None


_probe_lock = threading.Lock()


async def direct_supported() -> bool:
    """Whether nodes reach our writer through the private path (checked once per process)."""
    if _direct is None:
        _run_probe()
    return bool(_direct)


def _run_probe() -> None:
    # synchronous and locked: hundreds of runs starting at once must not each build a probe graph
    global _direct
    with _probe_lock:
        if _direct is None:
            _direct = _probe()


class _Probe(TypedDict, total=False):
    x: int


def _probe() -> bool:
    def node(state: _Probe, runtime: Runtime[Any]) -> _Probe:
        runtime.stream_writer({"probe": 1})
        return {"x": 1}

    builder = StateGraph(_Probe)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    seen: list[Any] = []
    config = _direct_config({}, seen.append)
    if config is None:
        return False
    try:
        for _chunk in builder.compile().stream({"x": 0}, config, stream_mode=["values"]):
            pass
    except Exception:
        return False
    return seen == [{"probe": 1}]


class Listener:
    """Runs a graph in a task and yields, in order, ("event", what `accept` made of a payload a
    node wrote) and ("values", state) after each superstep of the root graph.

    `accept` sees each payload as the node writes it (on the loop's thread), before the node goes
    on: the run records its trace there, so that the rows of a step are held for the commit that
    follows the step (engine/state/journal.py) even when the node runs the next step at once. A
    payload it makes None of is not yielded, nor is any with `quiet` (a caller that wants only how
    the run ended)."""

    def __init__(
        self, accept: Callable[[Any], Any] = lambda payload: payload, *, quiet: bool = False
    ) -> None:
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._task: asyncio.Task[None] | None = None
        self._accept = accept
        self._quiet = quiet  # nobody reads the events: `accept` sees them, nothing yields them

    def _write(self, payload: Any) -> None:
        if threading.get_ident() == self._thread:
            self._accepted(payload)
        else:  # a node that runs in a worker thread
            self._loop.call_soon_threadsafe(self._accepted, payload)

    def _accepted(self, payload: Any) -> None:
        made = self._accept(payload)
        if made is not None and not self._quiet:
            self._queue.put_nowait(("event", made))

    async def listen(
        self,
        graph: Any,
        start: Any,
        config: dict[str, Any],
        context: Any,
        limits: TemplateLimits | None = None,
        fence: fencing.Fence | None = None,
        *,
        durability: Durability | None = "sync",
        synchronous: str | None = None,
        plan: Direct | None = None,
    ) -> AsyncGenerator[tuple[str, Any], None]:
        """`limits` bound the templates the graph's nodes render, and `fence` guards its checkpoints
        on a replica (engine/state/fencing.py): the graph runs in a task of its own, which sets them
        for everything it starts, as it does the disk guarantee of its writes, `synchronous`
        (engine/state/synchronous.py). `durability` is LangGraph's mode for the stream (None for a graph
        without a checkpointer). `plan`: run the graph without LangGraph's loop (an execution
        engine/runtime/direct_runs.py chose for it: engine/compile/direct.py)."""
        direct = _direct_config(config, self._write) if await direct_supported() else None
        body: Callable[[], Awaitable[None]]
        # without LangGraph's private path a graph a node invokes would not find the run's writer:
        # only a plan none of whose steps invokes one (no agent) then goes without LangGraph's loop
        if plan is not None and (direct is not None or plan.durable):
            body = functools.partial(
                self._run_direct, plan, start, direct or config, context, config["recursion_limit"]
            )
        else:
            body = functools.partial(
                self._stream, graph, start, config, direct, context, durability
            )
        pump = self._pump(body, limits, fence, synchronous)
        self._task = asyncio.get_running_loop().create_task(pump)
        try:
            while True:
                kind, value = await self._queue.get()
                if kind == "done":
                    return
                if kind == "error":
                    raise value
                yield kind, value
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Cancel the graph if it still runs, and wait until it has cleaned up."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _pump(
        self,
        body: Callable[[], Awaitable[None]],
        limits: TemplateLimits | None,
        fence: fencing.Fence | None,
        synchronous: str | None,
    ) -> None:
        """The run's task: `body` with the run's template limits, fence and disk guarantee set for
        everything it starts; its end or its error handed to the listener."""
        put = self._queue.put_nowait
        if limits is not None:
            set_limits(limits)  # this task's own context: nothing outside the run sees it
        fencing.enter(fence)
        commit_levels.enter(synchronous)
        try:
            await body()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the listener, which raises it in the run's task
            put(("error", exc))
            return
        put(("done", None))

    async def _run_direct(
        self, plan: Direct, start: Any, config: Any, context: Any, recursion_limit: int
    ) -> None:
        # with the config its nodes would get from LangGraph (engine/compile/direct.py)
        final = await plan.run(start, context, self._write, recursion_limit, config)
        self._queue.put_nowait(("values", final))

    async def _stream(
        self,
        graph: Any,
        start: Any,
        config: dict[str, Any],
        direct: RunnableConfig | None,
        context: Any,
        durability: Durability | None,
    ) -> None:
        put = self._queue.put_nowait
        if direct is not None:
            async for mode, data in graph.astream(
                start, direct, context=context, stream_mode=["values"], durability=durability
            ):
                put((mode, data))
        else:
            async for namespace, mode, data in graph.astream(
                start,
                config,
                context=context,
                stream_mode=["custom", "values"],
                subgraphs=True,
                durability=durability,
            ):
                if mode == "custom":  # LangGraph's stream: later than the node's write
                    self._accepted(data)
                elif not namespace:
                    put((mode, data))
