"""Drawings of a flow's graph (engine/compile/flowgraph.py): Mermaid, Graphviz DOT and JSON.

Shapes: block steps are boxes, decide and router steps diamonds, subflows subroutines, maps
parallelograms, approval gates, loop checks and foreach iterators hexagons; loop/foreach/map
bodies are clusters. Dashed edges are exits taken without running the step (`on_max_visits`,
an approval's `on_reject` and `on_timeout`) and delegation; a step behind `require_approval`
says so, and a step that accumulates outputs (`reduce:`) says which keys, and how. The JSON form
is the model itself (docs/serve.md shows it); the React Flow form is engine/compile/reactflow.py.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from engine.compile.flowgraph import FlowGraph, GraphEdge, GraphNode, Group, flow_graph
from engine.compile.reactflow import reactflow_json
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle

FORMATS = ("mermaid", "dot", "json", "reactflow")
_MERMAID_WORDS = {
    "end",
    "graph",
    "subgraph",
    "flowchart",
    "style",
    "class",
    "classdef",
    "click",
    "linkstyle",
    "direction",
    "default",
    "call",
    "href",
}


def draw(bundle: Bundle, fmt: str) -> str:
    """The flow's graph in one of FORMATS (`reactflow`: engine/compile/reactflow.py)."""
    if fmt == "reactflow":
        return reactflow_json(bundle)
    graph = flow_graph(bundle)
    if fmt == "json":
        return json.dumps(as_json(graph), ensure_ascii=False, indent=2) + "\n"
    return dot(graph) if fmt == "dot" else mermaid(graph)


class _Index:
    """A graph's nodes and groups by id, for the renderers that walk its clusters."""

    def __init__(self, graph: FlowGraph) -> None:
        self.nodes: dict[str, GraphNode] = {node.id: node for node in graph.nodes}
        self.groups: dict[str, Group] = {group.id: group for group in graph.groups}


# ---- JSON ----------------------------------------------------------------------------------


def as_json(graph: FlowGraph) -> JsonDict:
    """The model as JSON data: {flow, direction, nodes, edges, groups}. A node's `label` is its text
    (lines joined with newlines); an edge's `style` says how to draw it (solid or dashed)."""
    nodes = [
        {
            "id": n.id,
            "kind": n.kind,
            "label": n.label,
            "lines": n.lines,
            "shape": n.shape,
            "group": n.group,
            "step": n.step,
            "data": n.data,
            "handles": [asdict(h) for h in n.handles],
        }
        for n in graph.nodes
    ]
    edges = [
        {
            "id": e.id,
            "source": e.source,
            "target": e.target,
            "kind": e.kind,
            "label": e.label,
            "handle": e.handle,
            "bound": e.bound,
            "style": "dashed" if e.dashed else "solid",
        }
        for e in graph.edges
    ]
    groups = [
        {"id": g.id, "kind": g.kind, "label": g.label, "step": g.step, "parent": g.parent}
        for g in graph.groups
    ]
    return {
        "flow": graph.flow,
        "direction": graph.direction,
        "nodes": nodes,
        "edges": edges,
        "groups": groups,
    }


# ---- Mermaid -------------------------------------------------------------------------------

_MERMAID_SHAPES = {
    "box": ('["', '"]'),
    "diamond": ('{"', '"}'),
    "hexagon": ('{{"', '"}}'),
    "subroutine": ('[["', '"]]'),
    "parallelogram": ('[/"', '"/]'),
    "terminal": ('(["', '"])'),
    "circle": ('(("', '"))'),
}


def mermaid(graph: FlowGraph) -> str:
    """A Mermaid flowchart."""
    lines = [f"flowchart {graph.direction}"]
    _mermaid_members(_Index(graph), graph.members, lines, "    ")
    lines.extend(f"    {mermaid_edge(edge)}" for edge in graph.edges)
    return "\n".join(lines) + "\n"


def mermaid_node(node: GraphNode) -> str:
    """One node of a Mermaid flowchart: its id, shape and text."""
    left, right = _MERMAID_SHAPES[node.shape]
    text = "<br/>".join(_mermaid_text(line) for line in node.lines)
    return f"{mermaid_id(node.id)}{left}{text}{right}"


def mermaid_edge(edge: GraphEdge) -> str:
    """One edge of a Mermaid flowchart: dashed for exits and delegation, with its label."""
    arrow = "-.->" if edge.dashed else "-->"
    label = f'|"{_mermaid_text(edge.label)}"|' if edge.label else ""
    return f"{mermaid_id(edge.source)} {arrow}{label} {mermaid_id(edge.target)}"


def _mermaid_members(
    graph: _Index, members: list[tuple[str, str]], lines: list[str], indent: str
) -> None:
    for what, member in members:
        if what == "node":
            lines.append(f"{indent}{mermaid_node(graph.nodes[member])}")
        else:
            group = graph.groups[member]
            lines.append(
                f'{indent}subgraph {mermaid_id(group.key)}__cluster["{_mermaid_text(group.label)}"]'
            )
            _mermaid_members(graph, group.members, lines, indent + "    ")
            lines.append(f"{indent}end")


def mermaid_id(node_id: str) -> str:
    """A node id Mermaid does not read as a keyword (`end` -> `end_`)."""
    return f"{node_id}_" if node_id.lower() in _MERMAID_WORDS else node_id


def _mermaid_text(text: str) -> str:
    return (
        text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    )


# ---- DOT -----------------------------------------------------------------------------------

_DOT_SHAPES = {
    "box": "box",
    "diamond": "diamond",
    "hexagon": "hexagon",
    "subroutine": "component",
    "parallelogram": "parallelogram",
    "terminal": "oval",
    "circle": "circle",
}


def dot(graph: FlowGraph) -> str:
    """A Graphviz digraph."""
    lines = [
        f"digraph {_quote(graph.flow)} {{",
        f"    rankdir={'TB' if graph.direction == 'TD' else graph.direction};",
        '    node [shape=box, fontname="Helvetica"];',
        '    edge [fontname="Helvetica"];',
    ]
    _dot_members(_Index(graph), graph.members, lines, "    ")
    for edge in graph.edges:
        attributes = []
        if edge.label:
            attributes.append(f"label={_quote(edge.label)}")
        if edge.dashed:
            attributes.append("style=dashed")
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"    {_quote(edge.source)} -> {_quote(edge.target)}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_members(
    graph: _Index, members: list[tuple[str, str]], lines: list[str], indent: str
) -> None:
    for what, member in members:
        if what == "node":
            node = graph.nodes[member]
            label = "\\n".join(_escape(line) for line in node.lines)
            lines.append(
                f'{indent}{_quote(node.id)} [label="{label}", shape={_DOT_SHAPES[node.shape]}];'
            )
        else:
            group = graph.groups[member]
            lines.append(f"{indent}subgraph {_quote('cluster_' + group.key)} {{")
            lines.append(f"{indent}    label={_quote(group.label)};")
            _dot_members(graph, group.members, lines, indent + "    ")
            lines.append(f"{indent}}}")


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _quote(text: str) -> str:
    return f'"{_escape(text)}"'
