"""Which construct builds a step: one module per construct, chosen by the step's action.

A construct's module is imported the first time a flow has such a step: a cold `blockyard run` of
a flow of `uses:` steps does not load the router's RE2, the map's agent wiring or the gates
(tests/runtime/test_cold_start.py).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from engine.compile.builder import Built, Construct, GraphBuilder, Region
from engine.nodes.errors import internal
from engine.spec import StepSpec

# a step's action -> the module of engine/compile that builds it (its `build`)
BUILDERS: dict[str, str] = {
    "uses": "uses",
    "router": "router",
    "loop": "loop",
    "foreach": "foreach",
    "map": "mapping",
    "flow": "subflow",
    "approval": "approval",
}


def construct(builder: GraphBuilder, region: Region, step: StepSpec) -> Built:
    """Add the nodes of one step: `require_approval` puts a gate in front of them, a `max_visits`
    bound a visit guard in front of that."""
    action = step.action
    if action is None:
        raise internal(f"{builder.where(step.id)} without exactly one action", "BY300, BY301")
    build: Construct = _function(BUILDERS[action], "build")
    piece = build(builder, region, step)
    if step.require_approval is not False:
        piece = _function("approval", "wrap")(builder, region, step, piece)
    if step.max_visits is not None:
        piece = _function("visits", "wrap")(builder, region, step, piece)
    return piece


def _function(module: str, name: str) -> Callable[..., Any]:
    function: Callable[..., Any] = getattr(import_module(f"engine.compile.{module}"), name)
    return function
