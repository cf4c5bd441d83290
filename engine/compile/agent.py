"""Agent and smart blocks in a flow: the executors the compiler wires itself.

An agent's delegates are built here, where the flow's bundle and steps are known; what each name
resolves to is engine/spec/delegation.py's, the computation the validator judges delegation with:
- on a block, `delegates` name other agent blocks or flows (the bundle carries both);
- on a step, they name agent steps of the same list, or flows. A delegated step leaves the
  list's order: it runs only when the agent calls it, with the model's arguments for the inputs
  its `with:` does not bind (they sit over the context, like keys of the same name).
A name that is both an agent block (step) and a flow is the block (step). Delegation is followed
at compile time, trusting the validator: it refuses a cycle — an agent that could end up calling
itself (BY320) — and a chain deeper than MAX_DELEGATION_DEPTH (BY440). The one check left here is
the cycle's, as following one would never end: meeting it is a bug.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from engine.agents import AgentExecutor, AgentRun, Delegate
from engine.agents.executor import describe_outputs
from engine.compile.blockstep import BlockStep
from engine.compile.builder import GraphBuilder, Region
from engine.core.errors import BlockyardError
from engine.core.values import JsonDict
from engine.executors import agent, smart
from engine.nodes.call import Executor
from engine.nodes.context import RunContext
from engine.nodes.errors import StepFailed, internal
from engine.nodes.events import STEP_STARTED, elapsed_ms, emit, failed, finished
from engine.spec import AgentBlock, BlockSpec, FlowSpec, StepSpec, TypeSpec
from engine.spec.delegation import Agent, Callee, Catalog, flow_key
from engine.spec.typecheck import outputs_schema

# What is being compiled through delegation right now, outermost first ("block 'a'", "flow 'f'").
_CHAIN: ContextVar[tuple[str, ...]] = ContextVar("blockyard_delegation_chain", default=())


def executor_for(
    builder: GraphBuilder,
    region: Region | None,
    step: StepSpec | None,
    block: BlockSpec,
    ref: str,
    label: str,
) -> Executor | None:
    """The executor of an agent or smart block at a step (or map), else None (the kind's executor)."""
    if block.kind == "agent":
        return agent_executor(builder, region, step, block, label)
    if block.kind == "smart":
        return smart.prepare(
            block,
            builder.where(step.id) if step else f"flow '{builder.flow}'",
            program=builder.bundle.programs.get(ref),
        )
    return None


def agent_executor(
    builder: GraphBuilder,
    region: Region | None,
    step: StepSpec | None,
    block: AgentBlock,
    label: str,
) -> Executor:
    """An agent's executor with its delegates resolved (the step's first, then the block's)."""
    where = (
        builder.where(step.id) if step is not None else f"flow '{builder.flow}', agent '{label}'"
    )
    return _agent_executor(
        builder,
        region,
        Agent(block, builder.flow, step, region.delegated if region else {}),
        label,
        where,
    )


def _agent_executor(
    builder: GraphBuilder, region: Region | None, me: Agent, label: str, where: str
) -> AgentExecutor:
    key, chain = me.key, _CHAIN.get()
    if key in chain:  # refused by validate (BY320); following it here would never end
        cycle = " -> ".join([*chain[chain.index(key) :], key])
        raise internal(f"{where}: delegation that goes round in a cycle ({cycle})", "BY320")
    token = _CHAIN.set((*chain, key))
    try:
        delegates: dict[str, Delegate] = {}
        for callee in me.callees(_catalog(builder)):
            if callee.name not in delegates:
                # a name both the step and its block delegate to: the step's
                delegates[callee.name] = _delegate(builder, region, me, callee, label, where)
    finally:
        _CHAIN.reset(token)
    return agent.agent_executor(
        me.block, where, list(delegates.values()), flow=builder.flow, depth=len(chain)
    )


def _catalog(builder: GraphBuilder) -> Catalog:
    """The bundle's blocks and flows, as delegation follows them (engine/spec/delegation.py)."""

    def flow(name: str) -> FlowSpec | None:
        sub = builder.bundle.flows.get(name)
        return sub.flow if sub is not None else None

    return Catalog(builder.bundle.blocks.get, flow)


def _delegate(
    builder: GraphBuilder, region: Region | None, me: Agent, callee: Callee, label: str, where: str
) -> Delegate:
    if callee.kind == "flow":
        return _flow_delegate(builder, callee.name, label)
    if callee.kind == "step" and callee.step is not None and region is not None:
        target, inner = callee.step, me.inner(callee)
        executor = _agent_executor(
            builder, region, inner, builder.label(target.id), builder.where(target.id)
        )
        return _as_delegate(
            BlockStep(
                builder.flow,
                target.id,
                builder.label(target.id),
                inner.block,
                target.with_,
                region.frames,
                {},
                executor=executor,
                files=builder.bundle.prompts,
            ),
            callee.name,
            "step",
            target.description or inner.block.description,
            set(target.with_),
            pauses=executor.pauses,
        )
    if callee.kind == "agent":
        inner, name = me.inner(callee), f"{label}.{callee.name}"
        executor = _agent_executor(
            builder, None, inner, name, f"flow '{builder.flow}', agent '{name}'"
        )
        return _as_delegate(
            BlockStep(
                builder.flow,
                name,
                name,
                inner.block,
                {},
                (),
                {},
                executor=executor,
                files=builder.bundle.prompts,
            ),
            callee.name,
            "agent",
            inner.block.description,
            set(),
            isolated=True,
            pauses=executor.pauses,
        )
    if callee.of == "step":
        raise internal(
            f"{where}: delegate '{callee.name}', which is neither an agent step of the same list nor a "
            "flow of the bundle",
            "BY213, BY218",
        )
    raise internal(
        f"{where}: agent block '{me.block.block}' delegating to '{callee.name}', which is neither an "
        "agent block nor a flow of the bundle",
        "BY218",
    )


def _as_delegate(
    step: BlockStep,
    name: str,
    kind: str,
    description: str | None,
    bound: set[str],
    *,
    isolated: bool = False,
    pauses: bool = False,
) -> Delegate:
    """A sub-agent that runs as a block step: the model's arguments fill the inputs `with:` leaves open.
    An `isolated` one (a block's delegate, reusable anywhere) sees its arguments and defaults only."""
    open_inputs = {key: spec for key, spec in step.block.inputs.items() if key not in bound}

    async def invoke(args: JsonDict, run: AgentRun, runtime: Runtime[RunContext]) -> JsonDict:
        scope = (
            {"inputs": {}, "context": args, "steps": {}}
            if isolated
            else _scope(run.call.scope, args)
        )
        return await step.run(scope, runtime, run.call.index)

    def will_retry(exc: BaseException, attempt: int) -> bool:
        return isinstance(exc, StepFailed) and step.policies.will_retry(exc, attempt)

    text = " ".join(
        part
        for part in (description or f"Agent '{name}'.", describe_outputs(step.block.outputs))
        if part
    )
    return Delegate(
        name,
        kind,
        text,
        _parameters(open_inputs),
        invoke,
        step.policies.retry,
        will_retry,
        pauses=pauses,
    )


def _flow_delegate(builder: GraphBuilder, name: str, label: str) -> Delegate:
    key = flow_key(name)
    chain = _CHAIN.get()
    if key in chain:  # refused by validate (BY320); following it here would never end
        cycle = " -> ".join([*chain[chain.index(key) :], key])
        raise internal(
            f"flow '{builder.flow}': delegation that goes round in a cycle ({cycle})", "BY320"
        )
    bundle = builder.bundle.flows[name]
    prefix = f"{label}.{name}"
    token = _CHAIN.set((*chain, key))
    try:
        sub = builder.compiler.subflow(bundle, f"{prefix}.", builder.inline is not None)
    finally:
        _CHAIN.reset(token)

    async def invoke(args: JsonDict, run: AgentRun, runtime: Runtime[RunContext]) -> JsonDict:
        writer, index = run.call.writer, run.call.index
        started = time.monotonic()
        emit(
            writer,
            STEP_STARTED,
            prefix,
            {"block": None, "kind": "flow", "flow": name, "inputs": args},
            index,
        )
        try:
            # the run's context, as a `flow:` step's
            outputs = await sub.run_nested(args, runtime.context)
        except GraphBubbleUp:
            raise
        except StepFailed as exc:
            raise failed(
                writer,
                builder.flow,
                prefix,
                f"flow '{name}' failed at step '{exc.step}': {exc.reason}",
                started=started,
                index=index,
                cause=exc,
            ) from exc
        except BlockyardError as exc:
            raise failed(
                writer, builder.flow, prefix, str(exc), started=started, index=index
            ) from None
        except Exception as exc:
            raise failed(
                writer,
                builder.flow,
                prefix,
                f"flow '{name}': {sub.explain(exc)}",
                started=started,
                index=index,
                cause=exc,
            ) from exc
        finished(writer, prefix, outputs, duration_ms=elapsed_ms(started), index=index, flow=name)
        return outputs

    flow = bundle.flow
    returns = f"Returns {', '.join(flow.outputs)}." if flow.outputs else ""
    text = " ".join(part for part in (flow.description or f"Flow '{name}'.", returns) if part)
    return Delegate(
        name, "flow", text, _parameters(flow.inputs), invoke, pauses=bundle.gate() is not None
    )


def _parameters(inputs: Mapping[str, TypeSpec]) -> JsonDict:
    # the same shape: typed properties, required unless defaulted, nothing else
    return outputs_schema(inputs)


def _scope(scope: Mapping[str, Any] | None, args: JsonDict) -> dict[str, Any]:
    """The delegating step's template scope with the model's arguments over its context."""
    base: dict[str, Any] = dict(scope) if scope is not None else {"inputs": {}, "steps": {}}
    base["context"] = {**(base.get("context") or {}), **args}
    return base
