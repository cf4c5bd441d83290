"""The graph model: what a React Flow graph is made of (nodes, edges, the node types and handles it
knows), the problems that refuse it (GraphError), and GraphReader, which reads the JSON into nodes and
edges. The converter's stages build on GraphReader: edges.py, regions.py, messages.py, kinds.py, steps.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import BlockyardError
from engine.core.values import JsonDict
from engine.definitions.load import MAX_DEPTH
from engine.interchange.blocks import BlockPlacer, slug

NODE_TYPES = (
    "agent",
    "tool",
    "smart_node",
    "router",
    "iterator",
    "block",
    "loop",
    "map",
    "approval",
    "subflow",
    "end",
)
CONTAINERS = frozenset({"iterator", "loop", "map"})
NEXT, COMPLETE = "NEXT", "COMPLETE"
EXITS = {"reject": "on_reject", "timeout": "on_timeout", "max_visits": "on_max_visits"}
BRANCH = "branch-"
MESSAGE = "message"  # the flow input the first node reads, and the block input agents read it from
END = "end"
# the keys of a node's `data.step` copied onto its step as they are (what an exported flow carries)
STEP_KEYS = ("description", "with", "outputs", "emit", "max_visits", "on_max_visits", "delegates")


class GraphError(BlockyardError):
    """A graph that does not describe a flow; one line per problem, each naming a node or edge."""

    code = "invalid_graph"
    http_status = 422

    def __init__(self, where: str, problems: list[str]) -> None:
        self.where = where
        self.problems = problems
        super().__init__("\n".join(f"{where}: {problem}" for problem in problems))


@dataclass
class Node:
    id: str
    type: str
    data: JsonDict
    step: str  # the step id (the node id, made a name)
    position: int

    @property
    def label(self) -> str:
        return str(self.data.get("label") or self.id)


@dataclass
class Edge:
    id: str
    source: str
    target: str
    handle: str | None
    kind: str | None  # Blockyard's data.kind (an exported graph says which edge it was)


@dataclass
class Region:
    """One step list: the flow's, or the body of a container node."""

    owner: str | None
    entry: str
    members: list[str] = field(default_factory=list)


@dataclass
class Converted:
    flow: JsonDict
    placer: BlockPlacer


def as_dict(value: Any) -> JsonDict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_json(text: str | bytes, where: str) -> Any:
    """The graph's JSON, nested at most MAX_DEPTH levels like any document of the yard (engine/definitions/load.py):
    deeper is refused as a problem of the graph, never a RecursionError of the parser or the converter."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise GraphError(where, [f"not a graph: nesting deeper than {MAX_DEPTH} levels"]) from None
    except ValueError as exc:
        raise GraphError(where, [f"not JSON: {exc}"]) from None
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:  # without recursion, however deep
        item, depth = pending.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_DEPTH:
                    raise GraphError(
                        where, [f"not a graph: nesting deeper than {MAX_DEPTH} levels"]
                    )
                pending.append((child, depth + 1))
    return value


class GraphReader:
    """Reads the graph's JSON into nodes and edges, collecting a problem per bad node or edge."""

    def __init__(self, graph: Any, placer: BlockPlacer, name: str, where: str) -> None:
        self.graph = graph
        self.placer = placer
        self.name = name
        self.where = where
        self.problems: list[str] = []
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.flow_inputs: dict[str, JsonDict] = {}
        self.keys: dict[str, str] = {}  # node id -> the context key holding its message

    def fail(self, problem: str) -> None:
        self.problems.append(problem)

    def stop(self) -> None:
        if self.problems:
            raise GraphError(self.where, self.problems)

    def read(self) -> None:
        if not isinstance(self.graph, dict):
            self.fail("a graph is an object {nodes: [...], edges: [...]}")
            return
        nodes, edges = self.graph.get("nodes"), self.graph.get("edges", [])
        if not isinstance(nodes, list) or not nodes:
            self.fail("the graph has no nodes (`nodes` must be a non-empty list)")
            return
        if not isinstance(edges, list):
            self.fail("`edges` must be a list")
            return
        taken: set[str] = set()  # the step names given so far: each node gets its own
        for position, raw in enumerate(nodes):
            self._read_node(position, raw, taken)
        for position, raw in enumerate(edges):
            self._read_edge(position, raw, nodes)

    def _read_node(self, position: int, raw: Any, taken: set[str]) -> None:
        """One node, kept with a step name of its own, or a problem said about it."""
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"]:
            self.fail(f"nodes[{position}]: a node needs a text `id`")
            return
        node_id, kind = raw["id"], raw.get("type")
        data = raw.get("data") if raw.get("data") is not None else {}
        if node_id in self.nodes:
            self.fail(f"node '{node_id}': the id is used by another node too")
            return
        if kind not in NODE_TYPES:
            self.fail(
                f"node '{node_id}': unknown type {json.dumps(kind)} (known: {', '.join(NODE_TYPES)})"
            )
            return
        if not isinstance(data, dict):
            self.fail(f"node '{node_id}': `data` must be an object")
            return
        step = slug(node_id, "step")
        while step in taken:
            step += "_"
        taken.add(step)
        self.nodes[node_id] = Node(node_id, kind, data, step, position)

    def _read_edge(self, position: int, raw: Any, nodes: list[Any]) -> None:
        """One edge between two nodes, or the problems said about it (`nodes`: the graph's raw nodes)."""
        if not isinstance(raw, dict):
            self.fail(f"edges[{position}]: an edge is an object {{id, source, target}}")
            return
        edge_id = str(raw.get("id") or f"edges[{position}]")
        source, target = raw.get("source"), raw.get("target")
        handle = raw.get("sourceHandle")
        data = as_dict(raw.get("data"))
        for end, value in (("source", source), ("target", target)):
            if not isinstance(value, str) or value not in self.nodes:
                if isinstance(value, str) and any(
                    n.get("id") == value for n in nodes if isinstance(n, dict)
                ):
                    continue  # a node refused above: reported there
                shown = json.dumps(value)
                self.fail(f"edge '{edge_id}': its {end} {shown} is not a node of the graph")
        if handle is not None and not isinstance(handle, str):
            self.fail(f"edge '{edge_id}': `sourceHandle` must be text")
            return
        if isinstance(source, str) and isinstance(target, str):
            kind = data.get("kind") if isinstance(data.get("kind"), str) else None
            self.edges.append(Edge(edge_id, source, target, handle or None, kind))
