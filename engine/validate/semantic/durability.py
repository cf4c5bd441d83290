"""BY860-BY862: a flow's durability (docs/runtime.md, "Durability") must let its runs work.

A run in durability `none` keeps no checkpoint, so it cannot wait at an approval gate (its own, or
one of a subflow it runs). `exit` and `async` keep checkpoints where a run pauses, so they can.
The same rules judge a run's own choice at run time (engine/spec/durability.py).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.spec.block import BlockSpec
from engine.spec.durability import NO_CHECKPOINTS, gate_of
from engine.spec.flow import FlowSpec
from engine.validate.semantic.index import FlowIndex


def check_durability(index: FlowIndex) -> None:
    """BY860: the flow's `durability` keeps no checkpoints but it pauses; BY861: the same by
    blockyard.yaml's `durability`; BY862: `trace: false` next to a durability that keeps checkpoints."""
    flow = index.definition.spec
    config = index.project.config
    own = flow.durability
    mode = own or config.durability
    if flow.trace is False and own is not None and own not in NO_CHECKPOINTS:
        index.report(
            ("trace",),
            "BY862",
            f"flow '{index.name}': trace: false applies only to runs with durability none, and this flow's "
            f"durability is {own}: drop one of them",
        )
    if mode not in NO_CHECKPOINTS:
        return
    gate = gate_of(flow, _flows(index).get, _block(index))
    if gate is None:
        return
    why = (
        f"step '{gate}' is an approval gate, and a run with durability {mode} keeps no checkpoint to wait at "
        "(use sync, async or exit)"
    )
    if own is not None:
        index.report(
            ("durability",), "BY860", f"flow '{index.name}' cannot have durability {mode}: {why}"
        )
    else:
        index.report(
            ("flow",),
            "BY861",
            f"flow '{index.name}' gets durability {mode} from blockyard.yaml, but {why}: "
            "set durability: sync (or async, exit) on the flow",
        )


def _block(index: FlowIndex) -> Callable[[str], BlockSpec | None]:
    """A block reference -> its spec (the newest version for a bare name), or None."""

    def block(ref: str) -> BlockSpec | None:
        found = index.project.block(ref)
        return found.spec if found is not None else None

    return block


def _flows(index: FlowIndex) -> dict[str, FlowSpec]:
    """The yard's flows by name (the subflows a step may run)."""
    return {name: definition.spec for name, definition in index.project.flows.items()}
