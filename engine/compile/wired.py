"""The blocks whose executor the compiler wires itself, loaded only for a flow that has one.

An agent's delegates and a smart block's compiled program are resolved in engine/compile/agent.py,
which imports the agents package, the smart blocks' glue and what they use (jsonschema for a
delegate's arguments, the agent's graph): tens of milliseconds a flow of llm and transform blocks
never needs, so a cold `blockyard run` of such a flow does not pay them (tests/runtime/test_cold_start.py).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from engine.compile.builder import GraphBuilder, Region
from engine.nodes.call import Executor
from engine.spec import BlockSpec, StepSpec

WIRED_KINDS = frozenset({"agent", "smart"})
# engine/compile/agent.py's `executor_for`: (builder, region, step, block, ref, label) -> the executor or None
Wiring = Callable[
    [GraphBuilder, Region | None, StepSpec | None, BlockSpec, str, str], Executor | None
]
WIRING = "engine.compile.agent"

if TYPE_CHECKING:
    # imported for the checks only: import-linter sees the edge, mypy checks it against Wiring
    # (tests/test_registries.py)
    from engine.compile import agent

    _MEMBERS: tuple[Wiring, ...] = (agent.executor_for,)


def executor_for(
    builder: GraphBuilder,
    region: Region | None,
    step: StepSpec | None,
    block: BlockSpec,
    ref: str,
    label: str,
) -> Executor | None:
    """The executor of an agent or smart block at a step (or map), else None (the kind's executor)."""
    if block.kind not in WIRED_KINDS:
        return None
    wiring: Wiring = import_module(WIRING).executor_for  # on first use: see the module's docstring
    return wiring(builder, region, step, block, ref, label)
