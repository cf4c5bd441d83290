"""Agent and smart blocks in a flow: the runners the compiler wires itself.

An agent's delegates are resolved here, where the flow's bundle and steps are known:
- on a block, `delegates` name other agent blocks or flows (the bundle carries both);
- on a step, they name agent steps of the same list, or flows. A delegated step leaves the
  list's order: it runs only when the agent calls it, with the model's arguments for the inputs
  its `with:` does not bind (they sit over the context, like keys of the same name).
A name that is both an agent block (step) and a flow is the block (step). Delegation is followed
at compile time, so a cycle — an agent that could end up calling itself — is a CompileError
(validate reports it as BY320), and so is a chain deeper than MAX_DEPTH.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from engine.agents import MAX_DEPTH, AgentRun, Delegate
from engine.agents.runner import describe_outputs
from engine.compile.blockstep import BlockStep
from engine.compile.context import RunContext
from engine.compile.errors import CompileError, StepFailed
from engine.compile.events import STEP_STARTED, elapsed_ms, emit, failed, finished
from engine.errors import BlockyardError
from engine.executors.call import Runner
from engine.spec import BlockSpec, StepSpec, TypeSpec
from engine.typecheck import outputs_schema

if TYPE_CHECKING:
    from engine.compile.builder import GraphBuilder, Region

# What is being compiled through delegation right now, outermost first ("block 'a'", "flow 'f'").
_CHAIN: ContextVar[tuple[str, ...]] = ContextVar("blockyard_delegation_chain", default=())


def delegated(steps: list[StepSpec], blocks: Mapping[str, BlockSpec]) -> set[str]:
    """Ids of the steps of one list that an agent step of the list delegates to."""
    ids = {step.id for step in steps}
    agents = [step for step in steps if step.uses is not None and getattr(blocks.get(step.uses), "kind", "") == "agent"]
    return {name for step in agents for name in step.delegates if name in ids and name != step.id}


def split_delegated(steps: list[StepSpec], blocks: Mapping[str, BlockSpec], where: str
                    ) -> tuple[list[StepSpec], dict[str, StepSpec]]:
    """(the steps that run in the list's order, the delegated ones by id)."""
    names = delegated(steps, blocks)
    if not names:
        return steps, {}
    kept = [step for step in steps if step.id not in names]
    if not kept:
        raise CompileError(f"{where}: every step is a delegate of another one, so none of them runs first")
    return kept, {step.id: step for step in steps if step.id in names}


def runner_for(builder: GraphBuilder, region: Region | None, step: StepSpec | None, block: BlockSpec, ref: str,
               label: str) -> Runner | None:
    """The runner of an agent or smart block at a step (or map), else None (the kind's executor)."""
    if block.kind == "agent":
        return agent_runner(builder, region, step, block, label)
    if block.kind == "smart":
        from engine.executors import smart

        return smart.prepare(block, builder.where(step.id) if step else f"flow '{builder.flow}'",
                             program=builder.bundle.programs.get(ref))
    return None


def agent_runner(builder: GraphBuilder, region: Region | None, step: StepSpec | None, block: BlockSpec,
                 label: str) -> Runner:
    """An agent's runner with its delegates resolved (the step's first, then the block's)."""
    from engine.executors import agent

    where = builder.where(step.id) if step is not None else f"flow '{builder.flow}', agent '{label}'"
    key = f"step '{step.id}' of flow '{builder.flow}'" if step is not None and step.delegates else \
        f"agent block '{block.block}'"
    chain = _CHAIN.get()
    if key in chain:
        cycle = " -> ".join([*chain[chain.index(key):], key])
        raise CompileError(f"{where}: delegation goes round in a cycle ({cycle}); an agent cannot end up calling "
                           "itself")
    if len(chain) >= MAX_DEPTH:
        raise CompileError(f"{where}: delegation is nested more than {MAX_DEPTH} levels deep "
                           f"({' -> '.join([*chain, key])})")
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
        if target.uses is None:
            raise CompileError(f"{where}: delegate '{name}' is a step that runs no block (it needs `uses:` with an "
                               "agent block)")
        block = builder.block(target.uses, target.id)
        if block.kind != "agent":
            raise CompileError(f"{where}: delegate '{name}' is a step that uses {block.kind} block '{block.block}'; "
                               "only agent steps can be delegates")
        runner = agent_runner(builder, region, target, block, builder.label(target.id))
        assert region is not None
        return _as_delegate(BlockStep(builder.flow, target.id, builder.label(target.id), block, target.with_,
                                      region.frames, {}, runner=runner, files=builder.bundle.prompts),
                            name, "step", target.description or block.description, set(target.with_))
    if name in builder.bundle.flows:
        return _flow_delegate(builder, name, label)
    raise CompileError(f"{where}: delegate '{name}' is neither an agent step of the same list nor a flow of the "
                       "bundle")


def _block_delegate(builder: GraphBuilder, owner: BlockSpec, name: str, label: str, where: str) -> Delegate:
    block = builder.bundle.blocks.get(name)
    if block is not None and block.kind == "agent":
        inner = f"{label}.{name}"
        runner = agent_runner(builder, None, None, block, inner)
        return _as_delegate(BlockStep(builder.flow, inner, inner, block, {}, (), {}, runner=runner,
                                      files=builder.bundle.prompts), name, "agent",
                            block.description, set(), isolated=True)
    if name in builder.bundle.flows:
        return _flow_delegate(builder, name, label)
    raise CompileError(f"{where}: agent block '{owner.block}' delegates to '{name}', which is neither an agent "
                       "block nor a flow of the bundle")


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
    from engine.compile.flow import compile_subflow  # flow.py imports the constructs

    key = f"flow '{name}'"
    chain = _CHAIN.get()
    if key in chain:
        cycle = " -> ".join([*chain[chain.index(key):], key])
        raise CompileError(f"flow '{builder.flow}': delegation goes round in a cycle ({cycle}); an agent cannot "
                           "end up calling itself")
    bundle = builder.bundle.flows[name]
    prefix = f"{label}.{name}"
    token = _CHAIN.set((*chain, key))
    try:
        sub = compile_subflow(bundle, prefix=f"{prefix}.")
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
