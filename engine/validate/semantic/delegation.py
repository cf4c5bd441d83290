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
A delegation edge is on a cycle when its target leads back to its source. What a delegate's name
resolves to is engine/spec/delegation.py's, as the compiler follows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.diagnostics import Diagnostic
from engine.definitions.load import JsonPath
from engine.definitions.project import Project
from engine.spec import BlockSpec, FlowSpec
from engine.spec.delegation import Catalog, block_callees, step_callees
from engine.spec.walk import delegated_ids, step_lists
from engine.validate.semantic.graph import shortest_path
from engine.validate.semantic.index import FlowIndex, StepNode, catalog, issue


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
    found = catalog(project)
    for name, versions in project.blocks.items():
        for definition in versions.values():
            _block_edges(graph, found, name, definition.spec)
    for name, flow in project.flows.items():
        _flow_edges(graph, found, name, flow.spec)
    return graph


def _block_edges(graph: DelegationGraph, found: Catalog, name: str, spec: BlockSpec) -> None:
    if spec.kind != "agent":
        return
    for callee in block_callees(spec, found):
        if callee.kind is not None:
            target = f"{'block' if callee.kind == 'agent' else 'flow'}:{callee.name}"
            graph.delegate(
                Delegation(f"block:{name}", target, f"block:{name}", ("delegates", callee.position))
            )


def _flow_edges(graph: DelegationGraph, found: Catalog, name: str, flow: FlowSpec) -> None:
    here = f"flow:{name}"
    for listed in step_lists(flow.steps):
        steps, prefix = listed.steps, listed.path
        by_id = {step.id: step for step in steps}
        delegated = delegated_ids(steps, lambda step: found.agent(step.uses) is not None)
        siblings = {target: by_id[target] for target in delegated}
        for position, step in enumerate(steps):
            if step.flow is not None and found.flow(step.flow) is not None:
                graph.link(here, f"flow:{step.flow}")
            block = found.agent(
                step.uses if step.uses is not None else (step.map.uses if step.map else None)
            )
            if block is None:
                continue
            if not step.delegates:
                graph.link(here, f"block:{block.block}")
                continue
            node = f"step:{name}:{step.id}"
            graph.link(here, node)
            graph.link(node, f"block:{block.block}")
            for callee in step_callees(step, siblings, found):
                if callee.kind == "step" and callee.step is not None:
                    inner = callee.step
                    target = f"step:{name}:{inner.id}" if inner.delegates else f"block:{inner.uses}"
                elif callee.kind == "flow":
                    target = f"flow:{callee.name}"
                else:
                    continue
                graph.delegate(
                    Delegation(
                        node, target, here, (*prefix, position, "delegates", callee.position)
                    )
                )


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
            found.append(
                issue(
                    definition.doc, edge.path, "BY320", f"block '{name}': {_message(edge, cycle)}"
                )
            )
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
            index.broken = (
                True  # steps delegating to each other own each other's regions: no order to analyse
            )
    for node in index.walk():
        _reach(index, node)


def _reach(index: FlowIndex, node: StepNode) -> None:
    if node.runs_block is None or node.runs_block.kind != "agent":
        return  # not an agent step (BY317), or its block did not load (BY210)
    for position, name in enumerate(node.spec.delegates):
        target = index.by_id.get(name)
        if target is None or target is node or name in index.project.flows:
            continue
        if target.region.kind == "delegate" and target.path[:-1] == node.path[:-1]:
            # a delegate of its own list
            continue
        if target.runs_block is None or target.runs_block.kind != "agent":
            continue  # not an agent step at all: BY218 says so
        index.report(
            node.at("delegates", position),
            "BY213",
            f"step '{node.id}' delegates to step '{name}', which is in {target.region.home.describe()}; "
            f"a step delegates to agent steps of its own list ({node.region.home.describe()}) or to flows",
        )
