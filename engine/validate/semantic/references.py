"""Names that must resolve: blocks and their versions, step targets, subflows, inputs, outputs."""

from __future__ import annotations

from collections.abc import Iterator

from engine.core.diagnostics import did_you_mean
from engine.core.values import JsonDict
from engine.definitions.load import JsonPath
from engine.definitions.project import Project, relative
from engine.spec import END, ApprovalSpec
from engine.validate.semantic.index import FlowIndex, StepNode, quote_list

REF_HELP = "use `name` or `name@version`"


def check_references(index: FlowIndex) -> None:
    """Report every name in the flow that points at nothing (or at the wrong region)."""
    for node in index.walk():
        _block(index, node)
        _subflow(index, node)
        for where, name, allowed in targets(node):
            _target(index, node, where, name, allowed)
        _bindings(index, node)
        _renames(index, node)
        _delegates(index, node)


NEEDS: tuple[str, ...] = ()
GOTO = (END,)
EXIT = (END, "fail")


def targets(node: StepNode) -> Iterator[tuple[JsonPath, str, tuple[str, ...]]]:
    """(path, step name, keywords allowed there) of every place the step names another step."""
    spec = node.spec
    for position, name in enumerate(spec.needs):
        yield node.at("needs", position), name, NEEDS
    if spec.goto is not None:
        yield node.at("goto"), spec.goto, GOTO
    for value, target in (spec.branches or {}).items():
        yield node.at("branches", value), target, GOTO
    if spec.router is not None:
        for position, route in enumerate(spec.router.routes):
            yield node.at("router", "routes", position, "goto"), route.goto, GOTO
        yield node.at("router", "default"), spec.router.default, GOTO
    gates: list[tuple[ApprovalSpec, str]] = []
    if spec.approval is not None:
        gates.append((spec.approval, "approval"))
    if isinstance(spec.require_approval, ApprovalSpec):
        gates.append((spec.require_approval, "require_approval"))
    for gate, key in gates:
        yield node.at(key, "on_reject"), gate.on_reject, EXIT
        if gate.on_timeout not in ("approve", "reject"):
            yield node.at(key, "on_timeout"), gate.on_timeout, GOTO
    if "on_max_visits" in spec.model_fields_set:
        yield node.at("on_max_visits"), spec.on_max_visits, EXIT


def _target(
    index: FlowIndex, node: StepNode, where: JsonPath, name: str, allowed: tuple[str, ...]
) -> None:
    region = node.region
    if name in allowed or name in region.by_id:
        return
    index.broken = True
    if name == END:
        index.report(
            where,
            "BY212",
            f"step '{node.id}' needs `end`, which is no step: `needs` names steps "
            "that must finish first",
        )
        return
    elsewhere = index.by_id.get(name)
    if elsewhere is not None:
        index.report(
            where,
            "BY213",
            f"step '{node.id}' names step '{name}', which is in {elsewhere.region.describe()}; "
            f"steps in {region.describe()} can only go to steps of the same list (or `end`)",
        )
        return
    names = [*region.by_id, *allowed]
    index.report(
        where, "BY212", f"step '{node.id}' names unknown step '{name}'{did_you_mean(name, names)}"
    )


def _block(index: FlowIndex, node: StepNode) -> None:
    spec = node.spec
    if spec.uses is not None:
        ref, where = spec.uses, node.at("uses")
    elif spec.map is not None and spec.map.uses is not None:
        ref, where = spec.map.uses, node.at("map", "uses")
    else:
        return
    if node.block is not None:
        return
    index.broken = True
    name, _, version = ref.partition("@")
    versions = index.project.blocks.get(name)
    if "@" in ref and not (version.isascii() and version.isdigit()):
        index.report(
            where, "BY210", f"step '{node.id}': '{ref}' is not a block reference; {REF_HELP}"
        )
    elif versions:
        listed = ", ".join(str(v) for v in sorted(versions))
        index.report(
            where,
            "BY211",
            f"step '{node.id}' uses block '{name}' version {_short(version)}, which does not exist "
            f"(versions: {listed})",
        )
    else:
        broken = unloaded(index.project, index.project.config.paths.blocks, name)
        if broken is not None:
            index.report(
                where,
                "BY210",
                f"step '{node.id}' uses block '{name}', which did not load: fix the "
                f"problems reported in {broken}",
            )
            return
        named = _named_otherwise(index.project, index.project.config.paths.blocks, name)
        if named is not None:
            path, defined = named
            index.report(
                where,
                "BY210",
                f"step '{node.id}' uses unknown block '{name}': {path} defines block '{defined}' "
                f"(a step names a block by its `block:` id; use '{defined}', or rename it)",
            )
            return
        hint = did_you_mean(name, index.project.blocks)
        index.report(where, "BY210", f"step '{node.id}' uses unknown block '{name}'{hint}")


def _subflow(index: FlowIndex, node: StepNode) -> None:
    spec = node.spec
    if spec.flow is None or node.subflow is not None:
        return
    index.broken = True
    broken = unloaded(index.project, index.project.config.paths.flows, spec.flow)
    if broken is not None:
        index.report(
            node.at("flow"),
            "BY214",
            f"step '{node.id}' runs flow '{spec.flow}', which did not load: "
            f"fix the problems reported in {broken}",
        )
        return
    hint = did_you_mean(spec.flow, index.project.flows)
    index.report(
        node.at("flow"), "BY214", f"step '{node.id}' runs unknown flow '{spec.flow}'{hint}"
    )


def _named_otherwise(project: Project, folder: str, name: str) -> tuple[str, str] | None:
    """The file named like `name` in `folder` and the other id of the block it defines, if there is one."""
    base = (project.root / folder).resolve()
    for block, versions in project.blocks.items():
        for definition in versions.values():
            path = definition.doc.path
            if block != name and path.stem == name and path.parent.resolve() == base:
                return relative(path, project.root), block
    return None


def unloaded(project: Project, folder: str, name: str) -> str | None:
    """The file named like `name` in `folder` when it exists but failed to load (so the name is not a typo)."""
    base = (project.root / folder).resolve()
    loaded = {d.doc.path for versions in project.blocks.values() for d in versions.values()}
    loaded |= {d.doc.path for d in project.flows.values()}
    for path in project.files:
        if path.stem == name and path.parent.resolve() == base and path not in loaded:
            return relative(path, project.root)
    return None


def _bindings(index: FlowIndex, node: StepNode) -> None:
    spec = node.spec
    if spec.uses is not None and node.block is not None:
        block = node.block.spec
        _known_inputs(
            index, node, spec.with_, node.at("with"), list(block.inputs), f"block '{block.block}'"
        )
    if spec.map is not None and spec.map.uses is not None and node.block is not None:
        block = node.block.spec
        _known_inputs(
            index,
            node,
            spec.map.with_,
            node.at("map", "with"),
            list(block.inputs),
            f"block '{block.block}'",
        )
    if spec.flow is not None and node.subflow is not None:
        sub = node.subflow.spec
        _known_inputs(
            index, node, spec.with_, node.at("with"), list(sub.inputs), f"flow '{sub.flow}'"
        )
        missing = [
            name
            for name, decl in sub.inputs.items()
            if not decl.has_default and name not in spec.with_
        ]
        if missing:
            noun = "input" if len(missing) == 1 else "inputs"
            index.report(
                node.at("flow"),
                "BY217",
                f"step '{node.id}' runs flow '{sub.flow}' without its required {noun} "
                f"{quote_list(missing)}: bind {'it' if len(missing) == 1 else 'them'} in `with:`",
            )


def _known_inputs(
    index: FlowIndex,
    node: StepNode,
    bindings: JsonDict,
    where: JsonPath,
    inputs: list[str],
    owner: str,
) -> None:
    for name in bindings:
        if name not in inputs:
            declared = f"its inputs are {quote_list(inputs)}" if inputs else "it has no inputs"
            index.report(
                (*where, name),
                "BY215",
                f"step '{node.id}' binds '{name}', which is not an input of {owner} "
                f"({declared}){did_you_mean(name, inputs)}",
                key=True,
            )


def step_outputs(node: StepNode) -> list[str] | None:
    """What `steps.<id>.outputs` holds for a step (names before renames), or None when unknown."""
    spec = node.spec
    action = node.action
    names: list[str] = []
    if isinstance(spec.require_approval, ApprovalSpec):
        names.extend(spec.require_approval.fields)
    if action == "uses":
        if node.block is None:
            return None
        names.extend(node.block.spec.outputs)
    elif action == "flow":
        if node.subflow is None:
            return None
        names.extend(node.subflow.spec.outputs)
    elif action == "approval" and spec.approval is not None:
        names.extend(spec.approval.fields)
    elif action in ("map", "foreach"):
        body = spec.map if spec.map is not None else spec.foreach
        if body is not None and body.collect:
            names.append(body.collect)
    return names


def _renames(index: FlowIndex, node: StepNode) -> None:
    if not node.spec.outputs or node.action not in ("uses", "flow"):
        return
    produced = step_outputs(node)
    if produced is None:
        return
    for name in node.spec.outputs:
        if name not in produced:
            owner = _owner(node)
            listed = f"it writes {quote_list(produced)}" if produced else "it writes nothing"
            index.report(
                node.at("outputs", name),
                "BY216",
                f"step '{node.id}' renames '{name}', which is not an output of {owner} "
                f"({listed}){did_you_mean(name, produced)}",
                key=True,
            )


def _owner(node: StepNode) -> str:
    if node.action == "uses" and node.block is not None:
        return f"block '{node.block.spec.block}'"
    assert node.subflow is not None
    return f"flow '{node.subflow.spec.flow}'"


def _delegates(index: FlowIndex, node: StepNode) -> None:
    if not node.spec.delegates:
        return
    agent_steps = [
        n.id for n in index.nodes if n.runs_block is not None and n.runs_block.kind == "agent"
    ]
    for position, name in enumerate(node.spec.delegates):
        if name in index.project.flows or (name in agent_steps and name != node.id):
            continue
        if name in index.by_id and name != node.id:
            reason = f"step '{name}' does not use an agent block"
        elif name == node.id:
            reason = "a step cannot delegate to itself"
        else:
            hint = did_you_mean(name, [*agent_steps, *index.project.flows])
            reason = f"there is no agent step or flow of that name{hint}"
        index.report(
            node.at("delegates", position),
            "BY218",
            f"step '{node.id}' delegates to '{name}', but {reason}",
        )


def _short(text: str, limit: int = 20) -> str:
    return text if len(text) <= limit else f"{text[:10]}... ({len(text)} digits)"
