"""Agent and smart blocks in a flow: the executors the compiler wires itself.

An agent's delegates are resolved here, where the flow's bundle and steps are known:
- on a block, `delegates` name other agent blocks or flows (the bundle carries both);
- on a step, they name agent steps of the same list, or flows. A delegated step leaves the
  list's order: it runs only when the agent calls it, with the model's arguments for the inputs
  its `with:` does not bind (they sit over the context, like keys of the same name).
A name that is both an agent block (step) and a flow is the block (step). Delegation is followed
at compile time; the validator refuses a cycle — an agent that could end up calling itself (BY320)
— and a chain deeper than MAX_DEPTH (BY440), so meeting one here is a bug.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from engine.agents import MAX_DEPTH, AgentRun, Delegate
from engine.agents.executor import describe_outputs
from engine.compile.blockstep import BlockStep
from engine.compile.builder import GraphBuilder, Region
from engine.errors import BlockyardError
from engine.executors import agent, smart
from engine.nodes.call import Executor
from engine.nodes.context import RunContext
from engine.nodes.errors import StepFailed, internal
from engine.nodes.events import STEP_STARTED, elapsed_ms, emit, failed, finished
from engine.spec import BlockSpec, StepSpec, TypeSpec
from engine.typecheck import outputs_schema

# What is being compiled through delegation right now, outermost first ("block 'a'", "flow 'f'").
_CHAIN: ContextVar[tuple[str, ...]] = ContextVar("blockyard_delegation_chain", default=())


def executor_for(builder: GraphBuilder, region: Region | None, step: StepSpec | None, block: BlockSpec, ref: str,
               label: str) -> Executor | None:
    """The executor of an agent or smart block at a step (or map), else None (the kind's executor)."""
    if block.kind == "agent":
        return agent_executor(builder, region, step, block, label)
    if block.kind == "smart":
        return smart.prepare(block, builder.where(step.id) if step else f"flow '{builder.flow}'",
                             program=builder.bundle.programs.get(ref))
    return None


def agent_executor(builder: GraphBuilder, region: Region | None, step: StepSpec | None, block: BlockSpec,
                 label: str) -> Executor:
    """An agent's executor with its delegates resolved (the step's first, then the block's)."""
    where = builder.where(step.id) if step is not None else f"flow '{builder.flow}', agent '{label}'"
    key = f"step '{step.id}' of flow '{builder.flow}'" if step is not None and step.delegates else \
        f"agent block '{block.block}'"
    chain = _CHAIN.get()
    if key in chain:
        cycle = " -> ".join([*chain[chain.index(key):], key])
        raise internal(f"{where}: delegation that goes round in a cycle ({cycle})", "BY320")
    if len(chain) >= MAX_DEPTH:
        raise internal(f"{where}: delegation nested more than {MAX_DEPTH} levels deep ({' -> '.join([*chain, key])})",
                       "BY440")
    token = _CHAIN.set((*chain, key))
    try:
        delegates: dict[str, Delegate] = {}
        for name in step.delegates if step is not None else ():
            delegates.setdefault(name, _step_delegate(builder, region, step, name, label))  # type: ignore[arg-type]
        for name in block.delegates:
            delegates.setdefault(name, _block_delegate(builder, block, name, label, where))
    finally:
        _CHAIN.reset(token)
    return agent.prepare(block, where, list(delegates.values()), flow=builder.flow, depth=len(chain))


def _step_delegate(builder: GraphBuilder, region: Region | None, step: StepSpec, name: str, label: str
                   ) -> Delegate:
    where = builder.where(step.id)
    target = region.delegated.get(name) if region is not None else None
    if target is not None:
        assert target.uses is not None  # delegated steps are agent steps (engine/spec/walk.py, delegated_ids)
        block = builder.block(target.uses, target.id)
        executor = agent_executor(builder, region, target, block, builder.label(target.id))
        assert region is not None
        return _as_delegate(BlockStep(builder.flow, target.id, builder.label(target.id), block, target.with_,
                                      region.frames, {}, executor=executor, files=builder.bundle.prompts),
                            name, "step", target.description or block.description, set(target.with_))
    if name in builder.bundle.flows:
        return _flow_delegate(builder, name, label)
    raise internal(f"{where}: delegate '{name}', which is neither an agent step of the same list nor a flow of the "
                   "bundle", "BY213, BY218")


def _block_delegate(builder: GraphBuilder, owner: BlockSpec, name: str, label: str, where: str) -> Delegate:
    block = builder.bundle.blocks.get(name)
    if block is not None and block.kind == "agent":
        inner = f"{label}.{name}"
        executor = agent_executor(builder, None, None, block, inner)
        return _as_delegate(BlockStep(builder.flow, inner, inner, block, {}, (), {}, executor=executor,
                                      files=builder.bundle.prompts), name, "agent",
                            block.description, set(), isolated=True)
    if name in builder.bundle.flows:
        return _flow_delegate(builder, name, label)
    raise internal(f"{where}: agent block '{owner.block}' delegating to '{name}', which is neither an agent block "
                   "nor a flow of the bundle", "BY218")


def _as_delegate(step: BlockStep, name: str, kind: str, description: str | None, bound: set[str], *,
                 isolated: bool = False) -> Delegate:
    """A sub-agent that runs as a block step: the model's arguments fill the inputs `with:` leaves open.
    An `isolated` one (a block's delegate, reusable anywhere) sees its arguments and defaults only."""
    open_inputs = {key: spec for key, spec in step.block.inputs.items() if key not in bound}

    async def invoke(args: dict[str, Any], run: AgentRun, runtime: Runtime[RunContext]) -> dict[str, Any]:
        scope = {"inputs": {}, "context": args, "steps": {}} if isolated else _scope(run.call.scope, args)
        return await step.run(scope, runtime, run.call.index)

    def will_retry(exc: BaseException, attempt: int) -> bool:
        return isinstance(exc, StepFailed) and step.policies.will_retry(exc, attempt)

    text = " ".join(part for part in (description or f"Agent '{name}'.", describe_outputs(step.block.outputs))
                    if part)
    return Delegate(name, kind, text, _parameters(open_inputs), invoke, step.policies.retry, will_retry)


def _flow_delegate(builder: GraphBuilder, name: str, label: str) -> Delegate:
    key = f"flow '{name}'"
    chain = _CHAIN.get()
    if key in chain:
        cycle = " -> ".join([*chain[chain.index(key):], key])
        raise internal(f"flow '{builder.flow}': delegation that goes round in a cycle ({cycle})", "BY320")
    bundle = builder.bundle.flows[name]
    prefix = f"{label}.{name}"
    token = _CHAIN.set((*chain, key))
    try:
        sub = builder.compiler.subflow(bundle, f"{prefix}.", builder.inline is not None)
    finally:
        _CHAIN.reset(token)

    async def invoke(args: dict[str, Any], run: AgentRun, runtime: Runtime[RunContext]) -> dict[str, Any]:
        writer, index = run.call.writer, run.call.index
        started = time.monotonic()
        emit(writer, STEP_STARTED, prefix, {"block": None, "kind": "flow", "flow": name, "inputs": args}, index)
        try:
            outputs = await sub.run_nested(args, runtime.context)  # the run's context, as a `flow:` step's
        except GraphBubbleUp:
            raise
        except StepFailed as exc:
            raise failed(writer, builder.flow, prefix, f"flow '{name}' failed at step '{exc.step}': {exc.reason}",
                         started=started, index=index, cause=exc) from exc
        except BlockyardError as exc:
            raise failed(writer, builder.flow, prefix, str(exc), started=started, index=index) from None
        except Exception as exc:
            raise failed(writer, builder.flow, prefix, f"flow '{name}': {sub.explain(exc)}", started=started,
                         index=index, cause=exc) from exc
        finished(writer, prefix, outputs, duration_ms=elapsed_ms(started), index=index, flow=name)
        return outputs

    flow = bundle.flow
    returns = f"Returns {', '.join(flow.outputs)}." if flow.outputs else ""
    text = " ".join(part for part in (flow.description or f"Flow '{name}'.", returns) if part)
    return Delegate(name, "flow", text, _parameters(flow.inputs), invoke)


def _parameters(inputs: Mapping[str, TypeSpec]) -> dict[str, Any]:
    return outputs_schema(inputs)  # the same shape: typed properties, required unless defaulted, nothing else


def _scope(scope: Mapping[str, Any] | None, args: dict[str, Any]) -> dict[str, Any]:
    """The delegating step's template scope with the model's arguments over its context."""
    base: dict[str, Any] = dict(scope) if scope is not None else {"inputs": {}, "steps": {}}
    base["context"] = {**(base.get("context") or {}), **args}
    return base
