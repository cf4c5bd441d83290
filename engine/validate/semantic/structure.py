"""The shape of each step: one action, unique ids, a single start, keys that fit the action."""

from __future__ import annotations

from engine.spec import END, ApprovalSpec, StepSpec
from engine.spec.block import article
from engine.validate.semantic.control import continues_in_order
from engine.validate.semantic.index import FlowIndex, StepNode, quote_list

RESERVED = {END: "`end` names the end of the flow", "fail": "`fail` ends the run with an error"}
ACTION_KEYS = "uses, flow, router, loop, foreach, map or approval"


def check_steps(index: FlowIndex) -> None:
    """Actions, ids, start markers, needs and step keys of every step of the flow."""
    seen: dict[str, StepNode] = {}
    for node in index.walk():
        _actions(index, node)
        _identity(index, node, seen)
        _keys(index, node)
    for region in index.regions:
        starts = [node for node in region.steps if node.spec.start]
        for extra in starts[1:]:
            index.report(
                extra.at("start"),
                "BY304",
                f"step '{extra.id}' is marked start: true, but '{starts[0].id}' already is; "
                f"{region.describe()} has one entry",
            )
            index.broken = True
        _needs(index, region.steps)


def _actions(index: FlowIndex, node: StepNode) -> None:
    # a step without an action is refused by the union of the actions' models (BY300, engine/spec/flow.py)
    actions = node.spec.actions
    if len(actions) > 1:
        index.report(
            node.at(actions[1]),
            "BY301",
            f"step '{node.id}' has several actions ({', '.join(actions)}); a step does exactly one "
            "thing: split it into several steps",
            key=True,
        )
        index.broken = True


def _identity(index: FlowIndex, node: StepNode, seen: dict[str, StepNode]) -> None:
    if node.id in RESERVED or node.id.startswith("__"):
        why = RESERVED.get(node.id, "ids starting with '__' name the engine's own graph nodes")
        index.report(
            node.at("id"), "BY303", f"step id '{node.id}' is reserved ({why}); choose another id"
        )
        index.broken = True
    first = seen.setdefault(node.id, node)
    if first is not node:
        line = index.doc.where(first.at("id"))[0]
        index.report(
            node.at("id"),
            "BY302",
            f"step id '{node.id}' is already used at line {line}; step ids are unique in the "
            "whole flow, nested steps included",
        )
        index.broken = True


def _keys(index: FlowIndex, node: StepNode) -> None:
    """Keys a step carries that its kind does not read, or that contradict each other."""
    spec = node.spec
    action = node.action
    if "with_" in spec.model_fields_set and spec.with_ and action not in ("uses", "flow", None):
        hint = " (a map takes its bindings in map.with)" if action == "map" else ""
        index.report(
            node.at("with"),
            "BY317",
            f"step '{node.id}': `with:` binds inputs of a block or subflow, and this step runs "
            f"neither{hint}",
            key=True,
        )
    if spec.outputs and action not in ("uses", "flow", None):
        hint = (
            " (name its result with `collect:`)"
            if action in ("map", "foreach")
            else (" (name the fields as the context keys you want)" if action == "approval" else "")
        )
        index.report(
            node.at("outputs"),
            "BY317",
            f"step '{node.id}': `outputs:` renames what a block or subflow writes, and this is "
            f"{article(action)} step{hint}",
            key=True,
        )
    _map_keys(index, node)
    _delegates_key(index, node)
    _gate_keys(index, node)


def _map_keys(index: FlowIndex, node: StepNode) -> None:
    """A map runs a block or a body, and binds inputs only of a block."""
    spec = node.spec
    if spec.map is not None and (spec.map.uses is None) == (not spec.map.steps):
        both = spec.map.uses is not None
        index.report(
            node.at("map", "steps") if both else node.at("map"),
            "BY319",
            f"step '{node.id}': a map runs either a block (`uses:`) or a body (`steps:`) per item, "
            f"{'not both' if both else 'and this one has neither'}",
            key=True,
        )
        index.broken = True
    elif spec.map is not None and spec.map.steps is not None and spec.map.with_:
        index.report(
            node.at("map", "with"),
            "BY317",
            f"step '{node.id}': map.with binds the inputs of the map's block, and this map runs a body "
            "of steps (bind inputs in those steps' `with:`)",
            key=True,
        )


def _delegates_key(index: FlowIndex, node: StepNode) -> None:
    """`delegates:` only on a step of an agent block; no require_approval on an approval step."""
    spec = node.spec
    action = node.action
    if spec.delegates and action is not None:
        block = node.runs_block
        if action != "uses" or (block is not None and block.kind != "agent"):
            what = (
                f"block '{block.block}' is {article(block.kind)} block"
                if block is not None and action == "uses"
                else f"it is {article(action)} step"
            )
            index.report(
                node.at("delegates"),
                "BY317",
                f"step '{node.id}': `delegates:` only applies to steps that use an agent block, "
                f"and {what}",
                key=True,
            )
    if action == "approval" and spec.require_approval:
        index.report(
            node.at("require_approval"),
            "BY317",
            f"step '{node.id}' is an approval gate already; drop require_approval",
            key=True,
        )


def _gate_keys(index: FlowIndex, node: StepNode) -> None:
    """A gate's timeout that approves without its fields' values; visits and goto beside what already
    decides the same."""
    spec = node.spec
    fields = spec.model_fields_set
    for key, gate in step_gates(spec):
        missing = [name for name, field in gate.fields.items() if not field.has_default]
        if gate.on_timeout == "approve" and missing:
            noun = "field" if len(missing) == 1 else "fields"
            index.report(
                node.at(key, "on_timeout"),
                "BY445",
                f"step '{node.id}': on_timeout: approve needs a default for {noun} {quote_list(missing)} "
                "(nobody fills it in)",
            )
    if "on_max_visits" in fields and spec.max_visits is None:
        index.report(
            node.at("on_max_visits"),
            "BY316",
            f"step '{node.id}' sets on_max_visits but no max_visits, so it never applies",
            key=True,
        )
    if spec.goto is not None and (spec.router is not None or spec.branches is not None):
        other = "router" if spec.router is not None else "branches"
        index.report(
            node.at("goto"),
            "BY308",
            f"step '{node.id}' has both goto and {other}; its {other} already "
            f"{'chooses' if other == 'router' else 'choose'} the next step, so drop goto",
            key=True,
        )
        index.broken = True


def step_gates(spec: StepSpec) -> list[tuple[str, ApprovalSpec]]:
    """(key, gate) of the approval gates a step writes: its own `approval:` or its `require_approval:`."""
    gates: list[tuple[str, ApprovalSpec]] = []
    if spec.approval is not None:
        gates.append(("approval", spec.approval))
    if isinstance(spec.require_approval, ApprovalSpec):
        gates.append(("require_approval", spec.require_approval))
    return gates


def _needs(index: FlowIndex, steps: list[StepNode]) -> None:
    if not steps:
        return
    region = steps[0].region
    entry = region.entry
    for node in steps:
        for position, name in enumerate(node.spec.needs):
            where = node.at("needs", position)
            if name == node.id:
                index.report(where, "BY309", f"step '{node.id}' needs itself")
                index.broken = True
                continue
            target = region.by_id.get(name)
            if target is not None and not continues_in_order(target) and target.action is not None:
                how = (
                    "goto"
                    if target.spec.goto is not None
                    else ("a router" if target.spec.router is not None else "branches")
                )
                index.report(
                    where,
                    "BY309",
                    f"step '{node.id}' needs '{name}', which picks its successor with {how}; "
                    f"route to '{node.id}' from '{name}' instead",
                )
        if node is entry and node.spec.needs:
            entry_how = (
                "is marked start: true"
                if node.spec.start
                else f"is the first step of {region.describe()}"
            )
            index.report(
                node.at("needs"),
                "BY309",
                f"step '{node.id}' {entry_how}, so nothing runs before it; it cannot need "
                f"{quote_list(node.spec.needs)}",
                key=True,
            )
            index.broken = True
