"""Steps an agent of the same list delegates to: they leave the list's order and run only when the
agent calls them (engine/compile/agent.py wires them; engine/compile/draw.py draws them apart)."""

from __future__ import annotations

from collections.abc import Mapping

from engine.nodes.errors import CompileError
from engine.spec import BlockSpec, StepSpec


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
