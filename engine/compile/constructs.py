"""Which construct builds a step: one module per construct, chosen by the step's action."""

from __future__ import annotations

from engine.compile import approval, foreach, loop, mapping, router, subflow, uses, visits
from engine.compile.builder import Built, Construct, GraphBuilder, Region
from engine.nodes.errors import internal
from engine.spec import StepSpec

BUILDERS: dict[str, Construct] = {
    "uses": uses.build,
    "router": router.build,
    "loop": loop.build,
    "foreach": foreach.build,
    "map": mapping.build,
    "flow": subflow.build,
    "approval": approval.build,
}


def construct(builder: GraphBuilder, region: Region, step: StepSpec) -> Built:
    """Add the nodes of one step: `require_approval` puts a gate in front of them, a `max_visits`
    bound a visit guard in front of that."""
    action = step.action
    if action is None:
        raise internal(f"{builder.where(step.id)} without exactly one action", "BY300, BY301")
    piece = BUILDERS[action](builder, region, step)
    if step.require_approval is not False:
        piece = approval.wrap(builder, region, step, piece)
    if step.max_visits is not None:
        piece = visits.wrap(builder, region, step, piece)
    return piece
