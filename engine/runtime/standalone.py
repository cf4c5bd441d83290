"""A compiled flow as a standalone LangGraph graph: `yard.compile(name)` (docs/langgraph.md).

The engine runs a flow's graph with a `RunContext` it builds per run (engine/runtime/engine.py).
A graph handed to other LangGraph code has nobody to build one, may be run with the sync API
(our steps are coroutines) and should speak in the flow's own terms. So it is an outer graph of
one node, named for the flow, around the flow's graph:

- its input schema is the flow's `inputs` (top-level keys), its output schema the flow's `outputs`:
  `graph.invoke({"name": "Ada"})` returns `{"greeting": ..., "loud": ..., "words": 2}`; as a node
  of a hand-written graph it reads and writes the parent's keys of those names;
- the node runs the flow's graph as a subgraph (LangGraph finds it in the node's closure: steps
  show with `subgraphs=True` / `xray`), on the `RunContext` given as `context=` or else one it
  builds: models from the bundle's config, tools with a workspace per thread, memory on the
  run's LangGraph `store` when there is one. The context is built per run, nothing is global;
- the sync API runs the node's coroutine on a background event loop of the process.

Approval gates interrupt with LangGraph's `interrupt()`; resume with `Command(resume=decision)`
(engine/spec/decisions.py). The engine's own runs never go through this module.

Model tokens: the steps' chat models (real providers, and the offline mock through
engine/models/providers/replay.py) run with the step's LangChain callbacks, in the flow's subgraph.
LangGraph's `messages` stream mode without `subgraphs=True` (the LangGraph server's `messages-tuple`
by default) keeps only the chat models of the graph it streams, not of its subgraphs, so the node
hands those runs on (`_Lift`) to the messages handlers that would drop them, as runs of its own:
the flow is one node, and its tokens are that node's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import re
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, NotRequired, Required, TypeVar, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel._messages import StreamMessagesHandler
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from typing_extensions import TypedDict  # pydantic's JSON schemas need this one before Python 3.12

from engine.compile import CompiledFlow
from engine.core.errors import UsageError
from engine.core.events import RunStatus, now_iso
from engine.core.values import JsonDict
from engine.nodes.context import RunContext
from engine.runtime.memory import render_scope
from engine.spec import TypeSpec
from engine.state.memory import StoreMemory
from engine.templates.limits import using_limits

T = TypeVar("T")

# run id -> that run's context, without memory (Engine.context)
ContextMaker = Callable[[str], RunContext]

_PYTHON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list[Any],
    "object": dict[str, Any],
    "any": Any,
}
_SAFE_ID = re.compile(r"[^A-Za-z0-9_.-]")


def standalone_graph(
    compiled: CompiledFlow, contexts: ContextMaker
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The flow of `compiled` as a LangGraph graph that runs on its own (see the module's doc)."""
    flow = compiled.bundle.flow
    graph = compiled.graph
    inputs = {
        name: _typed(spec, required=not spec.has_default) for name, spec in flow.inputs.items()
    }
    outputs = {name: NotRequired[Any] for name in flow.outputs}
    input_schema = _typed_dict(f"{compiled.name}_inputs", inputs)
    output_schema = _typed_dict(f"{compiled.name}_outputs", outputs)
    state_schema = _typed_dict(f"{compiled.name}_state", {**outputs, **inputs})
    node_name = (
        compiled.name if compiled.name not in {**inputs, **outputs} else f"{compiled.name}.run"
    )

    async def run(
        state: dict[str, Any], config: RunnableConfig, runtime: Runtime[Any]
    ) -> dict[str, Any]:
        values = compiled.initial_state(
            {name: state[name] for name in flow.inputs if name in state}
        )
        given = runtime.context
        context = (
            given
            if isinstance(given, RunContext)
            else await _context(compiled, contexts, config, runtime.store, values["inputs"])
        )
        started = now_iso()
        with using_limits(context.limits):
            # a subgraph invoked in a node: LangGraph nests its checkpoints (and its interrupts) under this node
            final = await graph.ainvoke(
                values,
                {**_lifting(config), "recursion_limit": compiled.recursion_limit},
                context=context,
            )
            if "__interrupt__" in final:
                # no checkpointer: the gate's question, which cannot be answered
                return {}
            result: JsonDict = context.secrets.value(compiled.outputs(final))
        if isinstance(context.memory, StoreMemory) and not isinstance(given, RunContext):
            await context.memory.remember_run(
                {
                    "run_id": context.run_id,
                    "flow": compiled.name,
                    "version": compiled.bundle.version,
                    "status": str(RunStatus.FINISHED),
                    "inputs": values["inputs"],
                    "outputs": result,
                    "error": None,
                    "started": started,
                    "ended": now_iso(),
                }
            )
        return result

    def run_sync(
        state: dict[str, Any], config: RunnableConfig, runtime: Runtime[Any]
    ) -> dict[str, Any]:
        # `graph` named here too: LangGraph looks for a node's subgraph in its sync function's closure
        assert graph is not None
        return call_on_loop(lambda: run(state, config, runtime))

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        state_schema, input_schema=input_schema, output_schema=output_schema
    )
    builder.add_node(node_name, RunnableCallable(run_sync, run, name=node_name, trace=False))
    builder.add_edge(START, node_name)
    builder.add_edge(node_name, END)
    graph_of_flow = builder.compile(name=compiled.name)
    # the same object, told to check what it is asked to interrupt at (FlowGraph adds no state of its own)
    graph_of_flow.__class__ = FlowGraph
    return graph_of_flow


class FlowGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """The standalone graph of a flow: LangGraph's, but `interrupt_before` / `interrupt_after` naming
    anything but its one node (or "*") is refused. LangGraph ignores a node name it does not have, and
    the flow's steps are nodes of the subgraph inside, which a run's interrupt lists never reach: a
    caller asking to stop before step `s010` would see the flow run to its end."""

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        self._check_interrupts(kwargs)
        return super().stream(*args, **kwargs)

    def astream(self, *args: Any, **kwargs: Any) -> Any:
        self._check_interrupts(kwargs)
        return super().astream(*args, **kwargs)

    def _check_interrupts(self, kwargs: dict[str, Any]) -> None:
        nodes = [name for name in self.nodes if name not in (START, END)]
        for key in ("interrupt_before", "interrupt_after"):
            asked = kwargs.get(key)
            if not asked or asked == "*":
                continue
            unknown = [name for name in asked if name not in nodes and name != "*"]
            if unknown:
                shown = ", ".join(repr(name) for name in unknown)
                raise ValueError(
                    f"{key}={list(asked)!r}: the graph of flow {self.name!r} is one node, {nodes[0]!r}, around the "
                    f"flow's steps, so it cannot stop at {shown}. Interrupt at {nodes[0]!r} (or '*'), or give "
                    'the flow an approval gate where it should stop (docs/langgraph.md, "Interrupts").'
                )


async def _context(
    compiled: CompiledFlow,
    contexts: ContextMaker,
    config: RunnableConfig,
    store: BaseStore | None,
    inputs: JsonDict,
) -> RunContext:
    """A run's own context: its id (and workspace) is the LangGraph thread's, so that a run resumed
    after a gate finds the files it wrote; memory on the store, when the flow has a scope."""
    thread = (config.get("configurable") or {}).get("thread_id")
    run_id = _SAFE_ID.sub("_", str(thread))[:100].strip(".") if thread is not None else ""
    context = contexts(run_id or uuid.uuid4().hex)
    scope = render_scope(compiled.bundle, inputs)
    if scope is not None:
        if store is None:
            raise UsageError(
                f"flow '{compiled.name}' keeps memory (`memory: {{scope: ...}}`): give its graph a "
                "LangGraph store, e.g. `graph.copy(update={'store': InMemoryStore()})` or a parent "
                "graph compiled with `store=` (docs/langgraph.md)"
            )
        context.memory = await StoreMemory.open(store, scope, compiled.name, context.run_id)
    return context


class _Lift(BaseCallbackHandler):
    """Hands the chat model runs of the flow's steps on to `targets`, LangGraph's messages handlers
    that keep only their own graph's, as runs of the flow's node: the same chunks, under fresh run
    ids (a handler that saw the step's own run must not take the tokens twice), with the node's
    LangGraph metadata (and the step's node as `blockyard_node`)."""

    run_inline = True  # in order, in the caller's thread, as LangGraph's own handler

    def __init__(self, targets: list[StreamMessagesHandler], metadata: dict[str, Any]) -> None:
        self.targets = targets
        self.own = {
            key: value
            for key, value in metadata.items()
            if key.startswith("langgraph_") or key == "checkpoint_ns"
        }
        self.runs: dict[uuid.UUID, uuid.UUID] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        lifted = self.runs[run_id] = uuid.uuid4()
        inner = metadata or {}
        for target in self.targets:
            target.on_chat_model_start(
                serialized,
                messages,
                run_id=lifted,
                tags=tags,
                metadata={**inner, **self.own, "blockyard_node": inner.get("langgraph_node")},
            )

    def on_llm_new_token(
        self, token: Any, *, chunk: Any = None, run_id: uuid.UUID, **kwargs: Any
    ) -> None:
        lifted = self.runs.get(run_id)
        if lifted is not None:
            for target in self.targets:
                target.on_llm_new_token(token, chunk=chunk, run_id=lifted)

    def on_llm_end(self, response: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        lifted = self.runs.pop(run_id, None)
        if lifted is not None:
            for target in self.targets:
                target.on_llm_end(response, run_id=lifted)

    def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        lifted = self.runs.pop(run_id, None)
        if lifted is not None:
            for target in self.targets:
                target.on_llm_error(error, run_id=lifted)


def _lifting(config: RunnableConfig) -> RunnableConfig:
    """The node's config for the flow's graph, with a `_Lift` to the messages handlers of the node's
    run that leave subgraphs out (none: the config as it is)."""
    callbacks: Any = config.get("callbacks")
    handlers: list[Any] = list(getattr(callbacks, "handlers", callbacks) or [])
    targets = [h for h in handlers if isinstance(h, StreamMessagesHandler) and not h.subgraphs]
    if not targets:
        return config
    lift = _Lift(targets, dict(config.get("metadata") or {}))
    if isinstance(callbacks, list):
        return {**config, "callbacks": [*callbacks, lift]}
    manager = callbacks.copy()
    manager.add_handler(lift, inherit=True)
    return {**config, "callbacks": manager}


def _typed(spec: TypeSpec, *, required: bool) -> Any:
    kind = _PYTHON_TYPES.get(spec.type, Any)
    return Required[kind] if required else NotRequired[kind]


def _typed_dict(name: str, fields: dict[str, Any]) -> type[Any]:
    # the functional form: the keys are the flow's names, known only now
    return cast("type[Any]", cast(Any, TypedDict)(name, fields))


# ---- the sync API ----------------------------------------------------------------------------

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    """The process's loop for the sync API of standalone graphs, in a daemon thread: it lives as long
    as the process (nothing to close, nothing that waits for it at exit), and clients the steps
    cache (a model's HTTP connections) stay on one loop."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="blockyard-graphs", daemon=True).start()
            _loop = loop
        return _loop


def call_on_loop(make: Callable[[], Awaitable[T]]) -> T:
    """Run `make()` on the process's background event loop and wait for it, in a copy of the caller's
    context (LangGraph's config and the template limits are context variables)."""
    loop = _background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError(
            "a Blockyard flow's sync API was called on its own background loop: use ainvoke/astream"
        )
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def start() -> None:
        task = loop.create_task(cast("Any", make()))  # runs in `context` (this callback's)
        task.add_done_callback(lambda t: _settle(t, done))

    loop.call_soon_threadsafe(start, context=contextvars.copy_context())
    return done.result()


def _settle(task: asyncio.Task[Any], done: concurrent.futures.Future[Any]) -> None:
    if task.cancelled():
        done.cancel()
    elif (exc := task.exception()) is not None:
        done.set_exception(exc)
    else:
        done.set_result(task.result())
