"""Steps an agent of the same list delegates to: they leave the list's order and run only when the
agent calls them (engine/compile/agent.py wires them; engine/compile/draw.py draws them apart)."""

from __future__ import annotations

from collections.abc import Mapping

from engine.nodes.errors import internal
from engine.spec import BlockSpec, StepSpec
from engine.spec.walk import delegated_ids


def delegated(steps: list[StepSpec], blocks: Mapping[str, BlockSpec]) -> set[str]:
    """Ids of the steps of one list that an agent step of the list delegates to."""
    return delegated_ids(
        steps, lambda step: getattr(blocks.get(step.uses or ""), "kind", "") == "agent"
    )


def split_delegated(
    steps: list[StepSpec], blocks: Mapping[str, BlockSpec], where: str
) -> tuple[list[StepSpec], dict[str, StepSpec]]:
    """(the steps that run in the list's order, the delegated ones by id)."""
    names = delegated(steps, blocks)
    if not names:
        return steps, {}
    kept = [step for step in steps if step.id not in names]
    if not kept:
        raise internal(f"{where}: steps that all delegate to each other", "BY320")
    return kept, {step.id: step for step in steps if step.id in names}
