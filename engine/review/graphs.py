"""The graphs of a changed flow on both sides: which edges changed, and one Mermaid drawing of the
head with added, removed and changed steps marked (engine/compile/flowgraph.py is the model).

A flow is drawn only when it validates on that side: the graph model trusts a validated flow
(docs/architecture.md, "Where a rule lives"). Imports no LangGraph (engine/compile/__init__.py
loads the compiler on first use only).
"""

from __future__ import annotations

from engine.compile.draw import mermaid, mermaid_edge, mermaid_id, mermaid_node
from engine.compile.flowgraph import END_ID, START_ID, FlowGraph, GraphEdge, GraphNode, flow_graph
from engine.core.errors import UsageError
from engine.definitions.closure import block_refs, flow_problems
from engine.definitions.pinned import make_bundle
from engine.definitions.project import Project
from engine.review.changes import ADDED, AFFECTED, CHANGED, REMOVED, FlowDiff, YardDiff
from engine.spec.walk import walk_steps
from engine.validate.semantic import check_flow

CLASSES = {
    ADDED: "fill:#dafbe1,stroke:#1a7f37,stroke-width:2px,color:#000",
    REMOVED: "fill:#ffebe9,stroke:#cf222e,stroke-width:2px,stroke-dasharray:5 3,color:#000",
    CHANGED: "fill:#fff8c5,stroke:#9a6700,stroke-width:2px,color:#000",
}
EDGE_STYLES = {ADDED: "stroke:#1a7f37,stroke-width:2px", REMOVED: "stroke:#cf222e,stroke-width:2px"}


def graph_of(project: Project, name: str) -> FlowGraph | None:
    """The graph of flow `name`, or None when the flow does not validate on this side."""
    definition = project.flow(name)
    if definition is None:
        return None
    found = [*project.diagnostics, *check_flow(project, definition)]
    if flow_problems(project, found, name):
        return None
    try:
        return flow_graph(make_bundle(project, name))
    except UsageError:  # a prompt file that cannot be read: validate says which
        return None


def edge_key(graph: FlowGraph, edge: GraphEdge) -> str:
    """An edge as a reviewer reads it: `check → draft (branch: bad)`."""
    kind = f"{edge.kind}: {edge.label}" if edge.label and edge.label != edge.kind else edge.kind
    bound = f", bound {edge.bound}" if edge.bound is not None else ""
    return f"{_name(edge.source)} → {_name(edge.target)} ({kind}{bound})"


def _name(node_id: str) -> str:
    return {START_ID: "start", END_ID: "end"}.get(node_id, node_id)


def add_graphs(diff: YardDiff, base: Project, head: Project, *, draw: bool) -> None:
    """Fill in each changed flow's edges added and removed, and (`draw`) its marked Mermaid drawing."""
    changed_blocks = {f"block {b.name}" for b in diff.blocks}
    for flow in diff.flows:
        old = graph_of(base, flow.old_name or flow.name) if flow.status != ADDED else None
        new = graph_of(head, flow.name) if flow.status != REMOVED else None
        if old is not None and new is not None:
            before = {edge_key(old, e) for e in old.edges}
            after = {edge_key(new, e) for e in new.edges}
            flow.edges_added = [k for k in (edge_key(new, e) for e in new.edges) if k not in before]
            flow.edges_removed = [
                k for k in (edge_key(old, e) for e in old.edges) if k not in after
            ]
        if not draw:
            continue
        shown = new if flow.status != REMOVED else old
        if shown is None:
            side = "base" if flow.status == REMOVED else "head"
            flow.graph_note = f"not drawn: the flow does not validate on the {side} side (see `blockyard validate`)"
            continue
        flow.graph = marked(flow, old, shown, _steps_through(head, flow, changed_blocks))


def _steps_through(head: Project, flow: FlowDiff, changed_blocks: set[str]) -> set[str]:
    """The steps of the head that run a changed block: drawn as changed too."""
    definition = head.flow(flow.name)
    if definition is None or flow.status == REMOVED:
        return set()
    return {
        w.step.id
        for w in walk_steps(definition.spec.steps)
        if any(f"block {ref.partition('@')[0]}" in changed_blocks for ref in block_refs(w.step))
    }


def marked(flow: FlowDiff, old: FlowGraph | None, new: FlowGraph, through: set[str]) -> str:
    """The Mermaid drawing of `new`, the base's removed steps and edges added dashed, all marked."""
    status = {change.id: change.status for change in flow.steps}
    if flow.status == AFFECTED:
        status = {}
    for step in through:
        status.setdefault(step, CHANGED)
    lines = mermaid(new).rstrip("\n").split("\n")
    edge_status: dict[int, str] = {}
    removed_nodes: list[GraphNode] = []
    if old is not None and flow.status != REMOVED:
        removed_nodes = _draw_removed(old, new, lines, edge_status)
    if flow.status in (ADDED, REMOVED):
        every = {owner for node in new.nodes if (owner := _owner(node))}
        status = dict.fromkeys(every, flow.status)
    members: dict[str, list[str]] = {ADDED: [], REMOVED: [], CHANGED: []}
    for node in new.nodes:
        owner = _owner(node)
        if owner is not None and status.get(owner) in members:
            members[status[owner]].append(mermaid_id(node.id))
    members[REMOVED] += [mermaid_id(node.id) for node in removed_nodes]
    lines += _style_lines(members, edge_status)
    return "\n".join(lines) + "\n"


def _draw_removed(
    old: FlowGraph, new: FlowGraph, lines: list[str], edge_status: dict[int, str]
) -> list[GraphNode]:
    """Onto `lines`, the base's nodes and edges gone from `new`; into `edge_status`, the edges added and
    removed by number. Returns the removed nodes."""
    # Mermaid numbers edges in the order they are drawn (`linkStyle N`): `mermaid` draws each of
    # new.edges once, in order, and the removed ones drawn below come after them
    edge_count = len(new.edges)
    node_ids = {node.id for node in new.nodes}
    before = {edge_key(old, e) for e in old.edges}
    for number, edge in enumerate(new.edges):
        if edge_key(new, edge) not in before:
            edge_status[number] = ADDED
    removed_nodes = [node for node in old.nodes if node.id not in node_ids]
    for node in removed_nodes:
        lines.append(f"    {mermaid_node(node)}")
    known = node_ids | {node.id for node in removed_nodes}
    after = {edge_key(new, e) for e in new.edges}
    for edge in old.edges:
        if edge_key(old, edge) not in after and edge.source in known and edge.target in known:
            lines.append(f"    {mermaid_edge(edge)}")
            edge_status[edge_count] = REMOVED
            edge_count += 1
    return removed_nodes


def _style_lines(members: dict[str, list[str]], edge_status: dict[int, str]) -> list[str]:
    """The Mermaid classes and link styles that colour the added, removed and changed nodes and edges."""
    lines = [f"    classDef {name} {style}" for name, style in CLASSES.items()]
    for name, ids in members.items():
        if ids:
            lines.append(f"    class {','.join(dict.fromkeys(ids))} {name}")
    for name, style in EDGE_STYLES.items():
        numbers = [str(n) for n, s in sorted(edge_status.items()) if s == name]
        if numbers:
            lines.append(f"    linkStyle {','.join(numbers)} {style}")
    return lines


def _owner(node: GraphNode) -> str | None:
    """The step a node draws. A map's join stands for no step of its own (events never name it) but is
    drawn for the map (`<step>__join`, engine/compile/flowgraph.py): it is marked with it."""
    if node.step is None and node.kind == "join":
        return node.id.removesuffix("__join")
    return node.step
