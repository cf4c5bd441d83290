"""Delegation: agents that offer other agents, agent steps or flows to their model as tools.

BY320: delegation must not go round in a cycle. An agent that can end up calling itself — a block
delegating to a block that delegates back, a step delegating to a flow that runs the same agent
again, directly or through subflows — has no bound on how deep it goes, and the compiler, which
follows delegation, could not build it. BY213: a step delegates to agent steps of its own list
(which then run only when it calls them) or to flows; an agent step elsewhere in the flow is out
of its reach.

The graph has three kinds of nodes: `block:<name>` (an agent block), `flow:<name>` and
`step:<flow>:<id>` (an agent step with delegates). Delegation edges carry where they are written;
containment edges (a flow runs its agent steps, its subflows; a step runs its block) only connect.
A delegation edge is on a cycle when its target leads back to its source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.diagnostics import Diagnostic
from engine.load import JsonPath
from engine.project import Project
from engine.spec import BlockSpec, FlowSpec, StepSpec
from engine.spec.walk import delegated_ids, step_lists
from engine.validate.semantic.graph import shortest_path
from engine.validate.semantic.index import FlowIndex, StepNode, is_agent_step, issue


@dataclass(frozen=True)
class Delegation:
    source: str
    target: str
    owner: str  # "block:<name>" or "flow:<name>": the file the edge is written in
    path: JsonPath


@dataclass
class DelegationGraph:
    successors: dict[str, list[str]] = field(default_factory=dict)
    delegations: list[Delegation] = field(default_factory=list)

    def link(self, source: str, target: str) -> None:
        targets = self.successors.setdefault(source, [])
        if target not in targets:
            targets.append(target)

    def delegate(self, edge: Delegation) -> None:
        self.link(edge.source, edge.target)
        self.delegations.append(edge)

    def cycle(self, edge: Delegation) -> list[str] | None:
        """source -> target -> ... -> source, when the edge is on a cycle."""
        if edge.target == edge.source:
            return [edge.source, edge.source]
        back = shortest_path(edge.target, edge.source, self.successors)
        return [edge.source, *back] if back is not None else None


def delegation_graph(project: Project) -> DelegationGraph:
    """Who may call whom, over every agent block and flow of the project."""
    graph = DelegationGraph()
    for name, versions in project.blocks.items():
        for definition in versions.values():
            _block_edges(graph, project, name, definition.spec)
    for name, flow in project.flows.items():
        _flow_edges(graph, project, name, flow.spec)
    return graph


def _block_edges(graph: DelegationGraph, project: Project, name: str, spec: BlockSpec) -> None:
    if spec.kind != "agent":
        return
    for position, target in enumerate(spec.delegates):
        node = _callee(project, target)
        if node is not None:
            graph.delegate(Delegation(f"block:{name}", node, f"block:{name}", ("delegates", position)))


def _flow_edges(graph: DelegationGraph, project: Project, name: str, flow: FlowSpec) -> None:
    here = f"flow:{name}"
    for listed in step_lists(flow.steps):
        steps, prefix = listed.steps, listed.path
        siblings = delegated_ids(steps, lambda step: is_agent_step(step, project))
        by_id = {step.id: step for step in steps}
        for position, step in enumerate(steps):
            if step.flow is not None and project.flow(step.flow) is not None:
                graph.link(here, f"flow:{step.flow}")
            block = _agent(project, step)
            if block is None:
                continue
            if not step.delegates:
                graph.link(here, f"block:{block.block}")
                continue
            node = f"step:{name}:{step.id}"
            graph.link(here, node)
            graph.link(node, f"block:{block.block}")
            for index, target in enumerate(step.delegates):
                if target in siblings and target in by_id:
                    inner = by_id[target]
                    callee = f"step:{name}:{target}" if inner.delegates else f"block:{inner.uses}"
                elif project.flow(target) is not None:
                    callee = f"flow:{target}"
                else:
                    continue
                graph.delegate(Delegation(node, callee, here, (*prefix, position, "delegates", index)))


def _agent(project: Project, step: StepSpec) -> BlockSpec | None:
    ref = step.uses if step.uses is not None else (step.map.uses if step.map is not None else None)
    block = project.block(ref) if ref is not None else None
    return block.spec if block is not None and block.spec.kind == "agent" else None


def _callee(project: Project, name: str) -> str | None:
    """What a block's delegate names: an agent block (first) or a flow."""
    block = project.block(name)
    if block is not None and block.spec.kind == "agent":
        return f"block:{name}"
    if project.flow(name) is not None:
        return f"flow:{name}"
    return None


def _shown(node: str) -> str:
    kind, _, rest = node.partition(":")
    if kind == "step":
        flow, _, step = rest.partition(":")
        return f"step '{step}' of flow '{flow}'"
    return f"{'agent' if kind == 'block' else 'flow'} '{rest}'"


def _message(edge: Delegation, cycle: list[str]) -> str:
    target = _shown(edge.target)
    chain = " -> ".join(_shown(node) for node in cycle)
    return f"delegating to {target} goes round in a cycle ({chain}); an agent must not end up calling itself"


def check_block_delegation(project: Project, graph: DelegationGraph) -> list[Diagnostic]:
    """BY320 for delegation edges written in block files."""
    found: list[Diagnostic] = []
    for edge in graph.delegations:
        kind, _, name = edge.owner.partition(":")
        if kind != "block":
            continue
        cycle = graph.cycle(edge)
        if cycle is None:
            continue
        for definition in project.blocks.get(name, {}).values():
            found.append(issue(definition.doc, edge.path, "BY320", f"block '{name}': {_message(edge, cycle)}"))
    return found


def check_delegation(index: FlowIndex, graph: DelegationGraph) -> None:
    """BY320 for delegation edges written in this flow; BY213 for delegates out of a step's reach."""
    here = f"flow:{index.name}"
    for edge in graph.delegations:
        if edge.owner != here:
            continue
        cycle = graph.cycle(edge)
        if cycle is not None:
            step = edge.source.rsplit(":", 1)[-1]
            index.report(edge.path, "BY320", f"step '{step}': {_message(edge, cycle)}")
            index.broken = True  # steps delegating to each other own each other's regions: no order to analyse
    for node in index.walk():
        _reach(index, node)


def _reach(index: FlowIndex, node: StepNode) -> None:
    if node.runs_block is None or node.runs_block.kind != "agent":
        return  # not an agent step (BY317), or its block did not load (BY210)
    for position, name in enumerate(node.spec.delegates):
        target = index.by_id.get(name)
        if target is None or target is node or name in index.project.flows:
            continue
        if target.region.kind == "delegate" and target.path[:-1] == node.path[:-1]:  # a delegate of its own list
            continue
        if target.runs_block is None or target.runs_block.kind != "agent":
            continue  # not an agent step at all: BY218 says so
        index.report(node.at("delegates", position), "BY213",
                     f"step '{node.id}' delegates to step '{name}', which is in {target.region.home.describe()}; "
                     f"a step delegates to agent steps of its own list ({node.region.home.describe()}) or to flows")
