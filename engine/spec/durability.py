"""Durability modes (docs/runtime.md, "Durability"): which one a run gets, and what a mode cannot do.

A run's mode is its own choice (`blockyard run --durability`, `Yard.run(durability=...)`, the HTTP
body's `durability`), else its flow's `durability:`, else blockyard.yaml's, else `sync`. `none`
keeps no checkpoint at all, so a run in it can neither pause at an approval gate nor be resumed,
and a conversation turn (which starts from the thread's checkpoint) cannot be one. The validator
judges what a flow or blockyard.yaml declares (BY860, BY861, BY862); the runtime judges a run's
own choice with the same rules, here.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.spec.block import BlockSpec
from engine.spec.common import DEFAULT_DURABILITY
from engine.spec.config import ConfigSpec
from engine.spec.flow import FlowSpec, StepSpec
from engine.spec.walk import walk_steps

# the modes that keep no checkpoint for a run to pause at or go on from
NO_CHECKPOINTS = frozenset({"none"})


def mode_of(run: str | None, flow: FlowSpec, config: ConfigSpec) -> str:
    """The durability of a run: its own, else its flow's, else the yard's, else sync."""
    return run or flow.durability or config.durability or DEFAULT_DURABILITY


def synchronous_of(flow: FlowSpec, config: ConfigSpec | None) -> str | None:
    """The disk guarantee of a run's commits, in SQLite's spelling (engine/state/synchronous.py): its
    flow's `synchronous:`, else the yard's (`config`; None when the program chose the database's),
    else None: the state database's own."""
    chosen = flow.synchronous or (config.synchronous if config is not None else None)
    return chosen.upper() if chosen is not None else None


def keeps_trace(mode: str, run: bool | None, flow: FlowSpec, config: ConfigSpec) -> bool:
    """Whether a run in `mode` records its event trace: always with checkpoints (resume, approvals
    and `runs show` read it); with none, unless the run, else its flow, else the yard says `trace: false`."""
    if mode not in NO_CHECKPOINTS:
        return True
    for choice in (run, flow.trace, config.trace):
        if choice is not None:
            return choice
    return True


def is_gate(step: StepSpec) -> bool:
    """Whether a step pauses its run: an `approval:` step, or one behind `require_approval:`."""
    return step.approval is not None or step.require_approval is not False


def gate_of(
    flow: FlowSpec,
    subflow: Callable[[str], FlowSpec | None],
    block: Callable[[str], BlockSpec | None] = lambda ref: None,
) -> str | None:
    """The first gate at which a run of `flow` may pause: a step's (`sub.gate` inside subflow step
    `sub`), or a tool call an agent asks a person about (`step:tool`, `approve_tools`), following
    the flows its steps run (`subflow(name)`: the flow of that name, or None) and the blocks they use
    (`block(ref)`), agents' delegates included; None when nothing pauses."""
    return _gate_of(flow, subflow, block, (flow.flow,))


def _gate_of(
    flow: FlowSpec,
    subflow: Callable[[str], FlowSpec | None],
    block: Callable[[str], BlockSpec | None],
    seen: tuple[str, ...],
) -> str | None:
    for walked in walk_steps(flow.steps):
        step = walked.step
        if is_gate(step):
            return step.id
        names = [step.flow] if step.flow is not None else []
        for ref in (step.uses, step.map.uses if step.map is not None else None):
            tool, flows = _asks(ref, block, seen) if ref is not None else (None, [])
            if tool is not None:
                return f"{step.id}:{tool}"
            names.extend(flows)
        names.extend(step.delegates)
        for name in names:
            inner = subflow(name) if name not in seen else None
            found = _gate_of(inner, subflow, block, (*seen, name)) if inner is not None else None
            if found is not None:
                return f"{step.id}.{found}"
    return None


def _asks(
    ref: str, block: Callable[[str], BlockSpec | None], seen: tuple[str, ...]
) -> tuple[str | None, list[str]]:
    """The first tool an agent block (or an agent block it delegates to) asks a person about, and
    the names its delegates give (some may be flows)."""
    spec = block(ref)
    if spec is None or spec.kind != "agent" or f"block:{ref}" in seen:
        return None, []
    if spec.approve_tools:
        return next(iter(spec.approve_tools)), []
    flows: list[str] = []
    for name in spec.delegates:
        tool, more = _asks(name, block, (*seen, f"block:{ref}"))
        if tool is not None:
            return tool, []
        flows.extend([name, *more])
    return None, flows


def refusal(
    mode: str, *, flow: str, gate: str | None, thread: bool, trace: bool | None = None
) -> str | None:
    """Why a run of `flow` cannot run in `mode` (None when it can): it pauses at `gate`, it is a
    turn of a conversation thread, or it asks for no trace (`trace` False) with checkpoints."""
    if mode in NO_CHECKPOINTS and gate is not None:
        return (
            f"flow '{flow}' cannot run with durability {mode}: step '{gate}' is an approval gate, and a run "
            f"keeps no checkpoint to wait at in that mode (use sync, async or exit)"
        )
    if mode in NO_CHECKPOINTS and thread:
        return (
            f"flow '{flow}' cannot run a conversation turn with durability {mode}: a turn starts from the "
            f"thread's checkpoint (use sync, async or exit)"
        )
    if trace is False and mode not in NO_CHECKPOINTS:
        return (
            f"a run of flow '{flow}' can go without a trace only with durability none (runs that keep "
            f"checkpoints keep their trace: resume and approvals read it); its durability is {mode}"
        )
    return None
