"""A flow as a React Flow graph (docs/reactflow.md): `blockyard export reactflow FLOW`.

Built on the graph model (engine/compile/flowgraph.py): its nodes become React Flow nodes (a loop's
check and a map's join fold into the loop or map node, start becomes `data.isStart`), its edges
React Flow edges whose `sourceHandle` says which way out they are (a router's `route-N` and
`default`, a decide step's `branch-<value>`, a body's `NEXT` and what follows it, `COMPLETE`, the
exits `reject`, `timeout` and `max_visits`) and whose `data.kind` keeps the model's edge kind.
Each node's `data` carries what its step says besides where it goes (`step`: its bindings, outputs
and bounds as written; the block it runs; the gate's settings), and `flow` the flow's own settings,
so that importing the graph (engine/interchange/reactflow/) gives back the same flow.

What the web page draws (engine/serve/web/graph.js) rides along, ignored by the importer and by
editors: each node's `data.view` (the graph model's kind, text lines, shape and the group it sits
in), the graph's `groups` (loop, foreach and map bodies) and a dashed exit's or delegation's
React Flow `style`. Positions: a layered top-down layout (longest path from the entry with
back-edges set aside, each row ordered by its neighbours), one row per `Y_GAP`, one column per `X_GAP`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from engine.compile.flowgraph import END_ID, START_ID, FlowGraph, GraphEdge, GraphNode, flow_graph
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.spec import AgentBlock, SmartBlock, ToolBlock

X_GAP, Y_GAP = 260, 140
_NODE_TYPES = {
    "router": "router",
    "foreach": "iterator",
    "loop": "loop",
    "map": "map",
    "gate": "approval",
    "subflow": "subflow",
    "end": "end",
}
_BLOCK_TYPES = {"agent": "agent", "tool": "tool", "smart": "smart_node"}
_STEP_KEYS = ("description", "with", "outputs", "emit", "max_visits")
_KEPT_TARGETS = frozenset({"fail", "approve", "reject"})  # gate and visit settings that are no edge
DASHED = {"strokeDasharray": "4 3"}  # React Flow's edge `style` of exits and delegation
_SWEEPS = 6


def reactflow(bundle: Bundle) -> JsonDict:
    """The React Flow graph of a bundle's flow: {flow, nodes, edges}."""
    return _Exporter(bundle, flow_graph(bundle)).run()


def reactflow_json(bundle: Bundle) -> str:
    return json.dumps(reactflow(bundle), ensure_ascii=False, indent=2) + "\n"


def _raw_steps(steps: list[Any]) -> Iterator[JsonDict]:
    for step in steps:
        if not isinstance(step, dict):
            continue
        yield step
        for key in ("loop", "foreach", "map"):
            body = step.get(key)
            if isinstance(body, dict) and isinstance(body.get("steps"), list):
                yield from _raw_steps(body["steps"])


class _Exporter:
    def __init__(self, bundle: Bundle, graph: FlowGraph) -> None:
        self.bundle = bundle
        self.graph = graph
        source = bundle.source.get("flow") or bundle.flow.model_dump(
            by_alias=True, exclude_defaults=True
        )
        self.flow_data: JsonDict = source
        self.raw = {str(step.get("id")): step for step in _raw_steps(source.get("steps") or [])}
        self.groups = {group.id: group for group in graph.groups}
        self.nodes = {node.id: node for node in graph.nodes}

    def node_id(self, node_id: str) -> str:
        """The React Flow node a model node folds into: a loop's check and a map's join are the step's."""
        node = self.nodes[node_id]
        if node.kind == "join":
            return node_id.removesuffix("__join")
        if node.kind == "loop":
            return node.step or node_id
        return node_id

    def groups_of(self, node_id: str) -> list[str]:
        node = self.nodes[node_id]
        found: list[str] = []
        group = node.group
        while group is not None:
            found.append(group)
            group = self.groups[group].parent
        return found

    def loop_entry_owner(self, edge: GraphEdge) -> str | None:
        """A loop's body entry reached from outside the loop: the edge leads to the loop itself."""
        target = self.nodes[edge.target]
        if target.group is None or edge.kind == "loop-back":
            return None
        group = self.groups[target.group]
        if group.kind != "loop":
            return None
        inside = edge.source != START_ID and group.id in self.groups_of(edge.source)
        return None if inside else group.step

    def run(self) -> JsonDict:
        nodes: dict[str, JsonDict] = {}
        for node in self.graph.nodes:
            if node.kind == "loop":
                nodes[node.step or node.id] = self.loop_node(node)
            elif node.kind not in ("start", "join", "end"):
                nodes[node.id] = self.node(node)
        edges: list[JsonDict] = []
        uses_end = False
        for edge in self.graph.edges:
            if edge.source == START_ID:
                entry = self.loop_entry_owner(edge) or self.node_id(edge.target)
                nodes[entry]["data"]["isStart"] = True
                continue
            converted = self.edge(edge)
            if converted is None:
                continue
            uses_end = uses_end or converted["target"] == END_ID
            edges.append(converted)
        if uses_end:
            nodes[END_ID] = {"id": END_ID, "type": "end", "data": {"label": "end"}}
        for number, found in enumerate(edges):
            found["id"] = f"e{number}"
        ordered = list(nodes.values())
        for found in ordered:
            found["data"]["view"] = self.view(found["id"])
        layout(ordered, edges)
        settings = {k: v for k, v in self.flow_data.items() if k != "steps"}
        groups = [
            {"id": g.id, "kind": g.kind, "label": g.label, "step": g.step, "parent": g.parent}
            for g in self.graph.groups
        ]
        return {"flow": settings, "nodes": ordered, "edges": edges, "groups": groups}

    def view(self, node_id: str) -> JsonDict:
        """How the page draws a node: the graph model's kind, lines, shape and group (a loop is its check's)."""
        check = next((n for n in self.graph.nodes if n.kind == "loop" and n.step == node_id), None)
        model = check or self.nodes[node_id]
        return {
            "kind": model.kind,
            "lines": list(model.lines),
            "shape": model.shape,
            "group": model.group,
        }

    def edge(self, edge: GraphEdge) -> JsonDict | None:
        source_node = self.nodes[edge.source]
        source, target = self.node_id(edge.source), self.node_id(edge.target)
        owner = self.loop_entry_owner(edge)
        if owner is not None:
            target = owner
        handle: str | None = edge.handle
        if edge.kind in ("loop-back", "iterate", "fan-out"):
            handle = "NEXT"
        elif edge.kind == "exit":
            label = edge.label or ""
            handle = (
                "reject"
                if label == "reject"
                else "timeout"
                if label.startswith("timeout")
                else "max_visits"
            )
        elif source_node.kind in ("loop", "foreach", "join") and edge.kind in (
            "next",
            "default",
            "join",
        ):
            handle = (
                "COMPLETE"  # what follows the container (a loop's check, a map's join: the step's)
            )
        elif handle == "other":
            handle = None
        if target == END_ID and handle is None:
            return None  # a node with nowhere to go ends the flow: no edge needed
        found: JsonDict = {
            "id": "",
            "source": source,
            "target": target,
            "data": {"kind": edge.kind},
        }
        if handle is not None:
            found["sourceHandle"] = handle
        if edge.label:
            found["label"] = edge.label
        if edge.dashed:
            found["style"] = dict(DASHED)
        return found

    def base(self, node: GraphNode, kind: str) -> JsonDict:
        raw = self.raw.get(node.step or "", {})
        data: JsonDict = {"label": node.step or node.id}
        step = {
            key: raw[key] for key in _STEP_KEYS if key in raw
        }  # the step's own settings, as written
        if raw.get("on_max_visits") == "fail":
            step["on_max_visits"] = "fail"
        flows = [d for d in raw.get("delegates") or [] if d not in self.raw]
        if flows:
            step["delegates"] = flows
        if step:
            data["step"] = step
        gate = raw.get("require_approval")
        if isinstance(gate, dict):
            data["require_approval"] = {
                k: v
                for k, v in gate.items()
                if k not in ("on_reject", "on_timeout") or v in _KEPT_TARGETS
            }
        elif gate:
            data["require_approval"] = gate
        return {"id": node.id, "type": kind, "data": data}

    def node(self, node: GraphNode) -> JsonDict:
        raw = self.raw.get(node.step or "", {})
        if node.kind in ("step", "decide"):
            block = self.bundle.blocks.get(str(raw.get("uses") or ""))
            kind = _BLOCK_TYPES.get(block.kind if block is not None else "", "block")
            found = self.base(node, kind)
            data = found["data"]
            data["block"] = raw.get("uses")
            if isinstance(block, AgentBlock):
                data.update(
                    {
                        "system_prompt": block.prompt.system,
                        "tools": [*block.tools],
                        "max_iterations": block.max_iterations,
                        "profile": block.model if isinstance(block.model, str) else None,
                    }
                )
            elif isinstance(block, ToolBlock):
                data["tool"] = block.tool
                data["args"] = data.get("step", {}).pop("with", {})
                if data.get("step") == {}:
                    del data["step"]
            elif isinstance(block, SmartBlock):
                data.update(
                    {
                        "mode": "ChainOfThought" if block.mode == "chain_of_thought" else "Predict",
                        "goal": block.prompt.system if block.prompt else None,
                        "inputs": [
                            {"name": k, "desc": v.description or ""}
                            for k, v in block.inputs.items()
                        ],
                        "outputs": [
                            {"name": k, "desc": v.description or ""}
                            for k, v in block.outputs.items()
                        ],
                    }
                )
            return found
        kind = _NODE_TYPES[node.kind]
        found = self.base(node, kind)
        data = found["data"]
        if node.kind == "router":
            spec = self.bundle_step(node).router
            assert spec is not None
            data["value"] = spec.value
            data["routes"] = [
                {
                    "condition": route.kind,
                    "value": route.condition,
                    "target_handle": f"route-{number}",
                }
                for number, route in enumerate(spec.routes, 1)
            ]
            data["default_handle"] = "default"
        elif node.kind == "foreach":
            data.update({k: v for k, v in (raw.get("foreach") or {}).items() if k != "steps"})
        elif node.kind == "map":
            data.update({k: v for k, v in (raw.get("map") or {}).items() if k != "steps"})
        elif node.kind == "gate":
            gate = raw.get("approval") or {}
            data.update(
                {
                    k: v
                    for k, v in gate.items()
                    if k not in ("on_reject", "on_timeout") or v in _KEPT_TARGETS
                }
            )
        elif node.kind == "subflow":
            data["flow"] = raw.get("flow")
        return found

    def loop_node(self, check: GraphNode) -> JsonDict:
        step = check.step or check.id
        raw = self.raw.get(step, {})
        found = self.base(GraphNode(step, "loop", [step], "hexagon", step=step), "loop")
        found["data"].update({k: v for k, v in (raw.get("loop") or {}).items() if k != "steps"})
        return found

    def bundle_step(self, node: GraphNode) -> Any:
        from_walk = {step.id: step for step in _walk(self.bundle.flow.steps)}
        return from_walk[node.step or node.id]


def layout(nodes: list[JsonDict], edges: list[JsonDict]) -> None:
    """Positions, top-down in rows: a node's row is the longest path to it from the entry once the
    back-edges (found by a depth-first search from the entry) are set aside; each row is ordered by
    the mean column of its neighbours (a few sweeps down and up) and centred on the widest one."""
    ids = [node["id"] for node in nodes]
    following: dict[str, list[str]] = {node_id: [] for node_id in ids}
    for edge in edges:
        if edge["source"] != edge["target"]:
            following[edge["source"]].append(edge["target"])
    start = next((node["id"] for node in nodes if node["data"].get("isStart")), ids[0])
    back, order = _back_edges(ids, following, start)
    row = dict.fromkeys(ids, 0)
    for node_id in order:  # a topological order of the graph without its back-edges
        for target in following[node_id]:
            if (node_id, target) not in back:
                row[target] = max(row[target], row[node_id] + 1)
    if END_ID in row:
        row[END_ID] = max(row.values()) + (
            1 if any(r == row[END_ID] and i != END_ID for i, r in row.items()) else 0
        )
    rows: dict[int, list[str]] = {}
    for node_id in ids:
        rows.setdefault(row[node_id], []).append(node_id)
    near: dict[str, list[str]] = {node_id: [] for node_id in ids}
    for edge in edges:
        if edge["source"] != edge["target"]:
            near[edge["source"]].append(edge["target"])
            near[edge["target"]].append(edge["source"])
    column = {node_id: float(i) for members in rows.values() for i, node_id in enumerate(members)}
    for sweep in range(_SWEEPS):
        for number in sorted(rows, reverse=sweep % 2 == 1):

            def weight(node_id: str, number: int = number) -> float:
                others = [column[n] for n in near[node_id] if row[n] != number]
                return sum(others) / len(others) if others else column[node_id]

            rows[number].sort(key=weight)
            column.update({node_id: float(i) for i, node_id in enumerate(rows[number])})
    widest = max(len(members) for members in rows.values())
    by_id = {node["id"]: node for node in nodes}
    for number, members in rows.items():
        offset = (widest - len(members)) / 2
        for i, node_id in enumerate(members):
            by_id[node_id]["position"] = {"x": round((offset + i) * X_GAP), "y": number * Y_GAP}


def _back_edges(
    ids: list[str], following: dict[str, list[str]], start: str
) -> tuple[set[tuple[str, str]], list[str]]:
    """The edges that lead back to a node on the current path, and a topological order of the rest
    (iterative depth-first search: a long flow must not exhaust the stack)."""
    state: dict[str, int] = {}
    back: set[tuple[str, str]] = set()
    finished: list[str] = []
    for root in [start, *ids]:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(following[root]))]
        while stack:
            node_id, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                state[node_id] = 2
                finished.append(node_id)
                stack.pop()
            elif state.get(target) == 1:
                back.add((node_id, target))
            elif target not in state:
                state[target] = 1
                stack.append((target, iter(following[target])))
    return back, finished[::-1]


def _walk(steps: list[Any]) -> Iterator[Any]:
    for step in steps:
        yield step
        for body in (step.loop, step.foreach, step.map):
            if body is not None and body.steps:
                yield from _walk(body.steps)
