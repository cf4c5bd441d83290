"""What a pinned bundle holds at any depth (its flow's subflows, their subflows, ...): its blocks,
the flows its steps run, the model profiles a run may use, how much conversation its model
blocks are sent, the durability mode a run of it gets. The engine asks these when it prepares a run
(engine/runtime/engine.py)."""

from __future__ import annotations

from typing import Any

from engine.core.errors import UsageError
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.spec.block import DEFAULT_HISTORY, BlockSpec, ModelBlock
from engine.spec.budget import effective
from engine.spec.common import DURABILITY_MODES
from engine.spec.durability import keeps_trace, mode_of, refusal


def all_blocks(bundle: Bundle) -> list[BlockSpec]:
    """The blocks of a flow and of its subflows."""
    blocks = [*bundle.blocks.values()]
    pending = [*bundle.flows.values()]
    while pending:
        sub = pending.pop()
        blocks.extend(sub.blocks.values())
        pending.extend(sub.flows.values())
    return blocks


def uses_default_model(bundle: Bundle) -> bool:
    """Whether a block of the flow (or its subflows) talks to the `default` model profile."""
    return any(
        isinstance(block, ModelBlock) and block.model in (None, "default")
        for block in all_blocks(bundle)
    )


def history_window(bundle: Bundle) -> int | None:
    """How many earlier turns of a conversation any model block of the flow (or its subflows) can
    be sent — None for all of them (within `threads.history_chars`). A thread's checkpoint keeps
    no more; a flow without model blocks keeps the default."""
    wanted = [block.history_turns for block in all_blocks(bundle) if isinstance(block, ModelBlock)]
    if not wanted:
        return DEFAULT_HISTORY
    if any(turns is None for turns in wanted):
        return None
    return int(max(turns for turns in wanted if turns is not None))


def model_profiles(bundle: Bundle) -> list[Any]:
    """Every model profile a run of the flow may use: blockyard.yaml's, and blocks' inline ones."""
    inline = [
        block.model
        for block in all_blocks(bundle)
        if isinstance(block, ModelBlock)
        and block.model is not None
        and not isinstance(block.model, str)
    ]
    return [*bundle.config.models.values(), *inline]


def run_mode(
    bundle: Bundle, durability: str | None, trace: bool | None, *, gate: str | None, thread: bool
) -> tuple[str, bool]:
    """The durability mode of a run of `bundle` that asks for `durability` and `trace` (None: the
    flow's, else the yard's) and whether it keeps its trace; UsageError when it cannot work that way:
    it pauses at `gate`, or is a conversation turn, with no checkpoints (engine/spec/durability.py)."""
    if durability is not None and durability not in DURABILITY_MODES:
        raise UsageError(
            f"durability must be one of {', '.join(DURABILITY_MODES)}, not '{durability}'"
        )
    mode = mode_of(durability, bundle.flow, bundle.config)
    problem = refusal(mode, flow=bundle.name, gate=gate, thread=thread, trace=trace)
    if problem is not None:
        raise UsageError(problem)
    return mode, keeps_trace(mode, trace, bundle.flow, bundle.config)


def run_budget(bundle: Bundle) -> JsonDict | None:
    """The budget a new run of the bundle is held to (the flow's keys, else the yard's), as stored with the
    run: a later change of the yard's files does not move the limits of runs already made."""
    budget = effective(bundle.flow.budget, bundle.config.budget)
    return budget.model_dump(exclude_none=True) if budget is not None else None
