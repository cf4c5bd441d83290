"""Which construct builds a step: one module per construct, chosen by the step's action.

A construct's module is imported the first time a flow has such a step: a cold `blockyard run` of
a flow of `uses:` steps does not load the router's RE2, the map's agent wiring or the gates
(tests/runtime/test_cold_start.py).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from engine.compile.builder import Built, Construct, GraphBuilder, Region
from engine.nodes.errors import internal
from engine.spec import StepSpec

# what a module of WRAPPERS has as `wrap`: puts its nodes in front of a step's (`inner`)
Wrapper = Callable[[GraphBuilder, Region, StepSpec, Built], Built]

# a step's action -> the module of engine/compile that builds it (its `build`, a Construct)
BUILDERS: dict[str, str] = {
    "uses": "uses",
    "router": "router",
    "loop": "loop",
    "foreach": "foreach",
    "map": "mapping",
    "flow": "subflow",
    "approval": "approval",
}
# what wraps a step -> the module of engine/compile that does it (its `wrap`, a Wrapper)
WRAPPERS: dict[str, str] = {"require_approval": "approval", "max_visits": "visits"}

if TYPE_CHECKING:
    # every member, imported for the checks only: import-linter sees each edge, mypy checks each
    # against its type (tests/test_registries.py keeps these lists in step with BUILDERS and WRAPPERS)
    from engine.compile import approval, foreach, loop, mapping, router, subflow, uses, visits

    _BUILDERS: tuple[Construct, ...] = (
        uses.build,
        router.build,
        loop.build,
        foreach.build,
        mapping.build,
        subflow.build,
        approval.build,
    )
    _WRAPPERS: tuple[Wrapper, ...] = (approval.wrap, visits.wrap)


def construct(builder: GraphBuilder, region: Region, step: StepSpec) -> Built:
    """Add the nodes of one step: `require_approval` puts a gate in front of them, a `max_visits`
    bound a visit guard in front of that."""
    action = step.action
    if action is None:  # a second action (the first chose the step's model): validate refuses it
        raise internal(f"{builder.where(step.id)} with several actions", "BY301")
    build: Construct = import_module(f"engine.compile.{BUILDERS[action]}").build
    piece = build(builder, region, step)
    if step.require_approval is not False:
        piece = _wrapper("require_approval")(builder, region, step, piece)
    if step.max_visits is not None:
        piece = _wrapper("max_visits")(builder, region, step, piece)
    return piece


def _wrapper(what: str) -> Wrapper:
    wrap: Wrapper = import_module(f"engine.compile.{WRAPPERS[what]}").wrap
    return wrap
