"""Which construct builds a step: one module per construct, chosen by the step's action."""

from __future__ import annotations

from engine.compile import approval, foreach, loop, mapping, router, subflow, uses, visits
from engine.compile.builder import Built, Construct, GraphBuilder, Region
from engine.nodes.errors import CompileError
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
    actions = step.actions
    if len(actions) != 1:
        found = f"several ({', '.join(actions)})" if actions else "none"
        raise CompileError(f"{builder.where(step.id)}: a step needs exactly one of uses, router, loop, foreach, "
                           f"map, approval or flow; it has {found}")
    if actions[0] not in ("uses", "flow") and (step.with_ or step.outputs):
        key = "with" if step.with_ else "outputs"
        raise CompileError(f"{builder.where(step.id)}: `{key}:` applies to `uses:` and `flow:` steps, not to a "
                           f"{actions[0]} step" + (" (name its result with `collect:`)" if key == "outputs" else ""))
    if step.branches is not None and step.uses is None:
        raise CompileError(f"{builder.where(step.id)}: `branches:` needs a decide block (`uses:`); "
                           "use a router to branch on a value")
    if actions[0] == "approval" and step.require_approval is not False:
        raise CompileError(f"{builder.where(step.id)}: the step is an approval gate already; drop require_approval")
    piece = BUILDERS[actions[0]](builder, region, step)
    if step.require_approval is not False:
        piece = approval.wrap(builder, region, step, piece)
    if step.max_visits is not None:
        piece = visits.wrap(builder, region, step, piece)
    return piece
