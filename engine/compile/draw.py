"""Drawings of a flow's structure (Mermaid and Graphviz DOT), from the spec rather than from the
LangGraph graph: people see steps, branches with their conditions, loops, iterators and
subflows — not the engine's helper nodes. Deterministic (step order), so they can be diffed.

Shapes: block steps are boxes, decide and router steps diamonds, subflows subroutines, maps
parallelograms, approval gates, loop checks and foreach iterators hexagons; loop/foreach/map
bodies are clusters. Dashed edges are exits taken without running the step (`on_max_visits`,
an approval's `on_reject` and `on_timeout`); a step behind `require_approval` says so, and a step
that accumulates outputs (`reduce:`) says which keys, and how.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.bundle import Bundle
from engine.compile.agent import split_delegated
from engine.compile.topology import EXIT, plan_region
from engine.decisions import gate_spec
from engine.spec import BlockSpec, Route, StepSpec

START_ID, END_ID = "__start__", "__end__"
_MERMAID_WORDS = {"end", "graph", "subgraph", "flowchart", "style", "class", "classdef", "click", "linkstyle",
                  "direction", "default", "call", "href"}


@dataclass
class Node:
    id: str
    lines: list[str]
    shape: str  # box | diamond | hexagon | subroutine | parallelogram | terminal | circle


@dataclass
class Cluster:
    id: str
    title: str
    items: list[Node | Cluster] = field(default_factory=list)


@dataclass
class Edge:
    source: str
    target: str
    label: str | None = None
    dashed: bool = False


@dataclass
class Diagram:
    title: str
    root: Cluster
    edges: list[Edge] = field(default_factory=list)


def diagram(bundle: Bundle) -> Diagram:
    """The drawing of a bundle's flow, independent of the output format."""
    root = Cluster("", bundle.name)
    drawing = Diagram(bundle.name, root)
    root.items.append(Node(START_ID, ["start"], "terminal"))
    entry = _Drawer(bundle, drawing).region(bundle.flow.steps, root, END_ID, "the flow")
    root.items.append(Node(END_ID, ["end"], "terminal"))
    drawing.edges.insert(0, Edge(START_ID, entry))
    return drawing


class _Drawer:
    def __init__(self, bundle: Bundle, drawing: Diagram) -> None:
        self.blocks: Mapping[str, BlockSpec] = bundle.blocks
        self.where = f"flow '{bundle.name}'"
        self.drawing = drawing

    def edge(self, source: str, target: str, label: str | None = None, dashed: bool = False) -> None:
        self.drawing.edges.append(Edge(source, target, label, dashed))

    def region(self, steps: list[StepSpec], cluster: Cluster, exit_id: str, describe: str) -> str:
        """Draw `steps` into `cluster`; their ends go to `exit_id`. Returns the entry node."""
        steps, delegated = split_delegated(steps, self.blocks, self.where)
        plan = plan_region(steps, self.blocks, self.where, describe)
        ends: dict[str, tuple[str, str]] = {step.id: self.step(step, cluster) for step in steps}
        for sub in delegated.values():  # sub-agents: reached only through their agent's calls
            cluster.items.append(self._simple(sub, _bound(sub)))
        for step in [*steps, *delegated.values()]:
            for name in step.delegates:
                if name in delegated:
                    self.edge(ends[step.id][0] if step.id in ends else step.id, name, "delegates", dashed=True)

        def resolve(target: str) -> str:
            return exit_id if target == EXIT else ends[target][0]

        for step in steps:
            entry, out = ends[step.id]
            if step.router is not None:
                for route in step.router.routes:
                    self.edge(out, resolve(route.goto), _route_label(route))
                self.edge(out, resolve(step.router.default), "default")
            if step.branches is not None:
                for value, target in step.branches.items():
                    self.edge(out, resolve(target), value)
                for target in plan.following[step.id]:
                    self.edge(out, resolve(target), "other")
            elif step.router is None:
                done = "done" if step.loop is not None or step.foreach is not None else None
                for target in plan.following[step.id]:
                    self.edge(out, resolve(target), done)
            for target in plan.dependents[step.id]:
                self.edge(out, resolve(target))
            if step.max_visits is not None and step.on_max_visits != "fail":
                self.edge(entry, resolve(step.on_max_visits), f"after {step.max_visits} visits", dashed=True)
            gate = step.approval or gate_spec(step)
            if gate is not None and gate.on_reject != "fail":
                self.edge(entry, resolve(gate.on_reject), "reject", dashed=True)
            if gate is not None and gate.timeout is not None and gate.on_timeout not in ("approve", "reject"):
                self.edge(entry, resolve(gate.on_timeout), f"timeout {gate.timeout}", dashed=True)
        for needs, waiting in plan.barriers:
            for name in needs:
                self.edge(ends[name][1], ends[waiting][0])
        return ends[plan.entry][0]

    def step(self, step: StepSpec, cluster: Cluster) -> tuple[str, str]:
        """Draw one step; returns (node its predecessors point to, node its successors leave from)."""
        bound = _bound(step)
        if step.loop is not None:
            check = Node(f"{step.id}__check", [f"until {step.loop.until}" if step.loop.until else "repeat",
                                                f"max {step.loop.max_iterations}"], "hexagon")
            body = Cluster(step.id, f"loop {step.id}{bound}")
            cluster.items.append(body)
            entry = self.region(step.loop.steps, body, check.id, f"the loop body of step '{step.id}'")
            body.items.append(check)
            self.edge(check.id, entry, "again")
            return entry, check.id
        if step.foreach is not None:
            spec = step.foreach
            title = f"for each {spec.as_} in {spec.items}" + (f" → {spec.collect}" if spec.collect else "")
            body = Cluster(step.id, f"foreach {step.id}{bound}")
            cluster.items.append(body)
            iterator = Node(step.id, [step.id, title], "hexagon")
            body.items.append(iterator)
            entry = self.region(spec.steps, body, iterator.id, f"the foreach body of step '{step.id}'")
            self.edge(iterator.id, entry, "next")
            return iterator.id, iterator.id
        if step.map is not None:
            spec = step.map
            lines = [step.id, f"map {spec.as_} in {spec.items}"]
            if spec.uses:
                lines.append(f"uses {spec.uses}")
            if spec.max_concurrency:
                lines.append(f"max {spec.max_concurrency} at once")
            if spec.collect:
                lines.append(f"→ {spec.collect}")
            fan = Node(step.id, lines + ([bound.strip(" ,")] if bound else []), "parallelogram")
            if spec.steps is None:
                cluster.items.append(fan)
                return fan.id, fan.id
            cluster.items.append(fan)
            body = Cluster(f"{step.id}__body", f"each {spec.as_}")
            cluster.items.append(body)
            join = Node(f"{step.id}__join", ["join"], "circle")
            entry = self.region(spec.steps, body, join.id, f"the map body of step '{step.id}'")
            cluster.items.append(join)
            self.edge(fan.id, entry, "each item")
            return fan.id, join.id
        node = self._simple(step, bound)
        cluster.items.append(node)
        return node.id, node.id

    def _simple(self, step: StepSpec, bound: str) -> Node:
        if step.require_approval is not False:
            bound += ", after approval"
        if step.router is not None:
            return Node(step.id, [step.id, "router" + bound], "diamond")
        if step.flow is not None:
            return Node(step.id, [step.id, f"flow {step.flow}{bound}", *_accumulates(step)], "subroutine")
        if step.approval is not None:
            return Node(step.id, [step.id, f"approval{bound}"], "hexagon")
        block = self.blocks.get(step.uses or "")
        kind = block.kind if block is not None else "block"
        shape = "diamond" if kind == "decide" else "box"
        lines = [step.id, f"{kind} {step.uses}{bound}"]
        if kind == "agent":
            tools = [*step.delegates, *(block.delegates if block is not None else []), *(block.tools if block else [])]
            if tools:
                lines.append("tools: " + ", ".join(dict.fromkeys(tools)))
        return Node(step.id, [*lines, *_accumulates(step)], shape)


def _accumulates(step: StepSpec) -> list[str]:
    """The line naming the context keys a step accumulates (`reduce:`), if any."""
    found = [f"{step.output_key(name)} ({step.output_reduce(name)})" for name in step.outputs
             if step.output_reduce(name) is not None]
    return ["accumulates " + ", ".join(found)] if found else []


def _bound(step: StepSpec) -> str:
    if step.max_visits is None:
        return ""
    then = " then fail" if step.on_max_visits == "fail" else ""
    return f", max {step.max_visits} visits{then}"


def _route_label(route: Route) -> str:
    kind = route.kind
    return f"{kind.replace('_', ' ')} {getattr(route, kind)}"


# ---- Mermaid -------------------------------------------------------------------------------

_MERMAID_SHAPES = {
    "box": ('["', '"]'), "diamond": ('{"', '"}'), "hexagon": ('{{"', '"}}'), "subroutine": ('[["', '"]]'),
    "parallelogram": ('[/"', '"/]'), "terminal": ('(["', '"])'), "circle": ('(("', '"))'),
}


def mermaid(bundle: Bundle) -> str:
    """A Mermaid flowchart of the flow."""
    drawing = diagram(bundle)
    lines = ["flowchart TD"]
    _mermaid_cluster(drawing.root, lines, "    ")
    for edge in drawing.edges:
        arrow = "-.->" if edge.dashed else "-->"
        label = f'|"{_mermaid_text(edge.label)}"|' if edge.label else ""
        lines.append(f"    {_mid(edge.source)} {arrow}{label} {_mid(edge.target)}")
    return "\n".join(lines) + "\n"


def _mermaid_cluster(cluster: Cluster, lines: list[str], indent: str) -> None:
    for item in cluster.items:
        if isinstance(item, Node):
            left, right = _MERMAID_SHAPES[item.shape]
            text = "<br/>".join(_mermaid_text(line) for line in item.lines)
            lines.append(f"{indent}{_mid(item.id)}{left}{text}{right}")
        else:
            lines.append(f'{indent}subgraph {_mid(item.id)}__cluster["{_mermaid_text(item.title)}"]')
            _mermaid_cluster(item, lines, indent + "    ")
            lines.append(f"{indent}end")


def _mid(node_id: str) -> str:
    return f"{node_id}_" if node_id.lower() in _MERMAID_WORDS else node_id


def _mermaid_text(text: str) -> str:
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


# ---- DOT -----------------------------------------------------------------------------------

_DOT_SHAPES = {"box": "box", "diamond": "diamond", "hexagon": "hexagon", "subroutine": "component",
               "parallelogram": "parallelogram", "terminal": "oval", "circle": "circle"}


def dot(bundle: Bundle) -> str:
    """A Graphviz digraph of the flow."""
    drawing = diagram(bundle)
    lines = [f"digraph {_quote(drawing.title)} {{", "    rankdir=TB;",
             '    node [shape=box, fontname="Helvetica"];', '    edge [fontname="Helvetica"];']
    _dot_cluster(drawing.root, lines, "    ")
    for edge in drawing.edges:
        attributes = []
        if edge.label:
            attributes.append(f"label={_quote(edge.label)}")
        if edge.dashed:
            attributes.append("style=dashed")
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"    {_quote(edge.source)} -> {_quote(edge.target)}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_cluster(cluster: Cluster, lines: list[str], indent: str) -> None:
    for item in cluster.items:
        if isinstance(item, Node):
            label = "\\n".join(_escape(line) for line in item.lines)
            lines.append(f'{indent}{_quote(item.id)} [label="{label}", shape={_DOT_SHAPES[item.shape]}];')
        else:
            lines.append(f"{indent}subgraph {_quote('cluster_' + item.id)} {{")
            lines.append(f"{indent}    label={_quote(item.title)};")
            _dot_cluster(item, lines, indent + "    ")
            lines.append(f"{indent}}}")


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _quote(text: str) -> str:
    return f'"{_escape(text)}"'
