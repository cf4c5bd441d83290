"""React Flow graphs -> a flow (docs/reactflow.md): `blockyard import reactflow GRAPH.json`.

A graph is `{nodes: [{id, type, data, position}], edges: [{id, source, target, sourceHandle?}]}`
(plus Blockyard's optional `flow`: the flow's own settings). Every node becomes a step; what
follows what comes from the edges:

- an edge without a handle is "then": one leaving a node is its `goto`; several leaving one node
  run their targets in parallel, and a node reached from parallel nodes waits for all of them
  (`needs`); several reaching a node from different ways (a router's arms) just merge;
- a router's edges leave by the handles its routes name (`target_handle`) or its `default_handle`;
- an iterator's (or loop's, or map's) `NEXT` edge starts its body, whose last nodes lead back to
  it; its `COMPLETE` edge is what follows the last item (a `foreach`, `loop` or `map` body);
- `branch-<value>` handles are a decide step's branches; `reject`, `timeout` and `max_visits`
  handles are the exits of an approval, a `require_approval` gate and `max_visits`;
- an edge from an agent to an agent makes the target a sub-agent the source calls as a tool
  (unless the edge says `data.kind: next`);
- an `end` node (or an edge back to the body's iterator) ends the run (or the item's pass).

`data.step` holds a step's own settings as a flow file writes them (`with`, `outputs`, `emit`,
`max_visits`, ...): what an exported flow carries besides the node types' own fields.

Errors of the graph's shape name the node or edge; the flow it converts to is then checked by the
validator like any flow. Blocks: a node with `data.block` runs that block of the yard; agent,
tool and smart nodes without one get a new block (or an existing one with the same contract,
engine/interchange/blocks.py). The inverse is engine/compile/reactflow.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.errors import BlockyardError
from engine.interchange.blocks import BlockPlacer, slug
from engine.spec.flow import enum_text
from engine.templates import TemplateError, references

NODE_TYPES = ("agent", "tool", "smart_node", "router", "iterator", "block", "loop", "map", "approval",
              "subflow", "end")
CONTAINERS = frozenset({"iterator", "loop", "map"})
NEXT, COMPLETE = "NEXT", "COMPLETE"
EXITS = {"reject": "on_reject", "timeout": "on_timeout", "max_visits": "on_max_visits"}
BRANCH = "branch-"
CONDITIONS = ("contains", "equals", "starts_with", "regex", "expr")
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
    data: dict[str, Any]
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
    flow: dict[str, Any]
    placer: BlockPlacer


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_json(text: str | bytes, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise GraphError(where, [f"not JSON: {exc}"]) from None


def convert(graph: Any, placer: BlockPlacer, *, name: str, where: str) -> Converted:
    """The flow data of a React Flow graph; raises GraphError naming every node or edge that is wrong."""
    return _Converter(graph, placer, name, where).run()


class _Converter:
    def __init__(self, graph: Any, placer: BlockPlacer, name: str, where: str) -> None:
        self.graph = graph
        self.placer = placer
        self.name = name
        self.where = where
        self.problems: list[str] = []
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.flow_inputs: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}  # node id -> the context key holding its message

    def fail(self, problem: str) -> None:
        self.problems.append(problem)

    def stop(self) -> None:
        if self.problems:
            raise GraphError(self.where, self.problems)

    # ---- reading -------------------------------------------------------------------------

    def run(self) -> Converted:
        self.read()
        self.stop()
        self.classify()
        self.stop()
        entry = self.entry()
        self.stop()
        regions = self.regions(entry)
        self.stop()
        settings = as_dict(self.graph.get("flow"))
        self.message_keys()
        steps = self.steps(regions, None)
        self.stop()
        flow: dict[str, Any] = {"flow": self.name}
        flow.update({k: v for k, v in settings.items() if k not in ("flow", "steps")})
        given = as_dict(settings.get("inputs"))
        inputs = {**self.flow_inputs, **given}
        if inputs:
            flow["inputs"] = inputs
        if "outputs" not in settings:
            written = [key for key in dict.fromkeys(self.keys.values())]
            flow["outputs"] = {key: {"optional": True} for key in written}
        if "description" not in settings and isinstance(self.graph.get("description"), str):
            flow["description"] = self.graph["description"]
        flow["steps"] = steps
        return Converted(flow, self.placer)

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
        taken: set[str] = set()
        for position, raw in enumerate(nodes):
            if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"]:
                self.fail(f"nodes[{position}]: a node needs a text `id`")
                continue
            node_id, kind = raw["id"], raw.get("type")
            data = raw.get("data") if raw.get("data") is not None else {}
            if node_id in self.nodes:
                self.fail(f"node '{node_id}': the id is used by another node too")
                continue
            if kind not in NODE_TYPES:
                self.fail(f"node '{node_id}': unknown type {json.dumps(kind)} (known: {', '.join(NODE_TYPES)})")
                continue
            if not isinstance(data, dict):
                self.fail(f"node '{node_id}': `data` must be an object")
                continue
            step = slug(node_id, "step")
            while step in taken:
                step += "_"
            taken.add(step)
            self.nodes[node_id] = Node(node_id, kind, data, step, position)
        for position, raw in enumerate(edges):
            if not isinstance(raw, dict):
                self.fail(f"edges[{position}]: an edge is an object {{id, source, target}}")
                continue
            edge_id = str(raw.get("id") or f"edges[{position}]")
            source, target = raw.get("source"), raw.get("target")
            handle = raw.get("sourceHandle")
            data = as_dict(raw.get("data"))
            for end, value in (("source", source), ("target", target)):
                if not isinstance(value, str) or value not in self.nodes:
                    if isinstance(value, str) and any(n.get("id") == value for n in nodes if isinstance(n, dict)):
                        continue  # a node refused above: reported there
                    shown = json.dumps(value)
                    self.fail(f"edge '{edge_id}': its {end} {shown} is not a node of the graph")
            if handle is not None and not isinstance(handle, str):
                self.fail(f"edge '{edge_id}': `sourceHandle` must be text")
                continue
            if isinstance(source, str) and isinstance(target, str):
                kind = data.get("kind") if isinstance(data.get("kind"), str) else None
                self.edges.append(Edge(edge_id, source, target, handle or None, kind))

    # ---- edges ---------------------------------------------------------------------------

    def classify(self) -> None:
        """Sort every edge into: plain ("then"), delegate, or a handle its source understands."""
        self.plain: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        self.handled: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        self.delegations: dict[str, list[str]] = {n: [] for n in self.nodes}
        self.incoming: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        for edge in self.edges:
            source, target = self.nodes[edge.source], self.nodes[edge.target]
            self.incoming[target.id].append(edge)
            if source.type == "end":
                self.fail(f"edge '{edge.id}': it leaves the end node '{source.id}'")
                continue
            if source.type == "agent" and target.type == "agent" and edge.kind != "next" \
                    and edge.handle in (None, "delegate"):
                self.delegations[source.id].append(target.id)
                continue
            if edge.handle in (None, "next") and source.type not in CONTAINERS:
                self.plain[source.id].append(edge)
                continue
            handle = edge.handle or ""
            if source.type in CONTAINERS:
                if handle.upper() in (NEXT, COMPLETE):
                    edge.handle = handle.upper()
                    self.handled[source.id].append(edge)
                elif source.type == "map" and edge.handle is None:
                    self.plain[source.id].append(edge)
                elif handle in EXITS:
                    self.handled[source.id].append(edge)
                else:
                    shown = f"handle '{handle}'" if handle else "no handle"
                    self.fail(f"edge '{edge.id}': it leaves {source.type} '{source.id}' by {shown}; "
                              f"an {source.type} is left by NEXT (its body) or COMPLETE (after it)")
                continue
            if source.type == "router":
                if handle in self.router_handles(source) or handle in EXITS:
                    self.handled[source.id].append(edge)
                else:
                    known = ", ".join(self.router_handles(source)) or "none"
                    self.fail(f"edge '{edge.id}': router '{source.id}' has no handle '{handle}' "
                              f"(no route names it; its handles: {known})")
                continue
            if handle in EXITS or handle.startswith(BRANCH):
                self.handled[source.id].append(edge)
                continue
            self.fail(f"edge '{edge.id}': node '{source.id}' ({source.type}) has no handle '{handle}'")
        agents = {n.id: n for n in self.nodes.values() if n.type == "agent"}
        agents.update({n.label: n for n in list(agents.values())})
        for node in agents.values():
            tools = node.data.get("tools") if node.data.get("block") is None else None
            for name in tools if isinstance(tools, list) else []:
                if isinstance(name, str) and name in agents and agents[name].id not in self.delegations[node.id]:
                    self.delegations[node.id].append(agents[name].id)
        for node in self.nodes.values():
            if node.type in CONTAINERS:
                nexts = [e for e in self.handled[node.id] if e.handle == NEXT]
                if len(nexts) > 1:
                    self.fail(f"{node.type} '{node.id}': {len(nexts)} NEXT edges; its body starts at one node")
                elif not nexts and node.type != "map":
                    self.fail(f"{node.type} '{node.id}': no NEXT edge to the first node of its body")
            if node.type == "router":
                self.check_router(node)

    def router_handles(self, node: Node) -> list[str]:
        routes = as_list(node.data.get("routes"))
        handles = [str(r.get("target_handle")) for r in routes if isinstance(r, dict) and r.get("target_handle")]
        default = node.data.get("default_handle")
        return [*handles, *([str(default)] if default else [])]

    def check_router(self, node: Node) -> None:
        routes = node.data.get("routes", [])
        if not isinstance(routes, list):
            self.fail(f"router '{node.id}': `routes` must be a list")
            return
        for number, route in enumerate(routes):
            if not isinstance(route, dict):
                self.fail(f"router '{node.id}': routes[{number}] must be an object")
                continue
            condition = route.get("condition")
            if condition not in CONDITIONS:
                self.fail(f"router '{node.id}': routes[{number}] has condition {json.dumps(condition)} "
                          f"(known: {', '.join(CONDITIONS)})")
            if not isinstance(route.get("value"), str):
                self.fail(f"router '{node.id}': routes[{number}] needs a text `value`")
            if not route.get("target_handle"):
                self.fail(f"router '{node.id}': routes[{number}] needs a `target_handle`")

    # ---- entry and regions ---------------------------------------------------------------

    def entry(self) -> str:
        starts = [n.id for n in self.nodes.values() if n.data.get("isStart") is True]
        if len(starts) > 1:
            self.fail(f"{len(starts)} start nodes: {', '.join(repr(s) for s in starts)} (data.isStart "
                      "marks one entry)")
            return ""
        if starts:
            if self.nodes[starts[0]].type == "end":
                self.fail(f"node '{starts[0]}': an end node cannot be the start")
            return starts[0]
        free = [n.id for n in self.nodes.values() if not self.incoming[n.id] and n.type != "end"]
        if len(free) == 1:
            return free[0]
        if not free:
            self.fail("no start node: every node has an incoming edge; mark the entry with data.isStart: true")
        else:
            self.fail(f"no start node: {len(free)} nodes have no incoming edge "
                      f"({', '.join(repr(f) for f in free)}); mark the entry with data.isStart: true")
        return ""

    def successors(self, node_id: str) -> list[str]:
        return [*(e.target for e in self.plain[node_id]), *(e.target for e in self.handled[node_id]),
                *self.delegations[node_id]]

    def regions(self, entry: str) -> dict[str | None, Region]:
        """Every node's step list: the flow's, or its innermost container's body."""
        bodies: dict[str, set[str]] = {}
        for node in self.nodes.values():
            nexts = [e for e in self.handled[node.id] if e.handle == NEXT]
            if not nexts:
                continue
            body: set[str] = set()
            pending = [nexts[0].target]
            while pending:
                current = pending.pop()
                if current == node.id or current in body or self.nodes[current].type == "end":
                    continue
                body.add(current)
                pending.extend(self.successors(current))
            bodies[node.id] = body
            for after in (e.target for e in self.handled[node.id] if e.handle == COMPLETE):
                if after in body:
                    self.fail(f"{node.type} '{node.id}': its body (NEXT) reaches '{after}', which follows it "
                              f"(COMPLETE); the body's last node must lead back to '{node.id}'")
            if entry in body:
                self.fail(f"node '{entry}': the start node is inside the body of {node.type} '{node.id}'")
        owner: dict[str, str | None] = {}
        for node_id in self.nodes:
            holders = [c for c, body in bodies.items() if node_id in body]
            owner[node_id] = min(holders, key=lambda c: len(bodies[c])) if holders else None
        for c, body in bodies.items():
            for d, other in bodies.items():
                if c < d and body & other and not (other <= body or body <= other):
                        self.fail(f"the bodies of '{c}' and '{d}' overlap; a body lies wholly inside another")
        regions: dict[str | None, Region] = {None: Region(None, entry)}
        for container in bodies:
            first = next(e.target for e in self.handled[container] if e.handle == NEXT)
            regions[container] = Region(container, first)
        for node_id, node in self.nodes.items():
            if node.type != "end":
                regions[owner[node_id]].members.append(node_id)
        self.owner = owner
        for edge in self.edges:
            if edge.handle == NEXT and self.nodes[edge.source].type in CONTAINERS:
                continue
            if self.nodes[edge.target].type == "end" or self.nodes[edge.source].type == "end":
                continue
            source_region, target_region = owner[edge.source], owner[edge.target]
            if edge.target == source_region:
                continue  # back to the container: the end of one pass
            if source_region != target_region:
                inside = f"the body of '{source_region}'" if source_region else "the flow"
                there = f"the body of '{target_region}'" if target_region else "the flow's top level"
                self.fail(f"edge '{edge.id}': it leads from '{edge.source}' in {inside} to '{edge.target}' in "
                          f"{there}; control stays inside a body (leave it by returning to its node)")
        return regions

    # ---- messages ------------------------------------------------------------------------

    def message_keys(self) -> None:
        """The context key holding each node's message (what the next node reads as the last message)."""
        called = {target for targets in self.delegations.values() for target in targets}
        for node in self.nodes.values():
            if node.data.get("block") is not None or node.id in called:
                continue  # a sub-agent answers the agent that calls it, not the flow's context
            if node.type in ("agent", "tool"):
                self.keys[node.id] = node.step
            elif node.type == "smart_node":
                outputs = node.data.get("outputs")
                if isinstance(outputs, list) and outputs and isinstance(outputs[0], dict) and outputs[0].get("name"):
                    self.keys[node.id] = str(outputs[0]["name"])

    def last_message(self, node_id: str, seen: frozenset[str] = frozenset()) -> list[str]:
        """Expressions for the message(s) that reach `node_id`: the closest producers before it."""
        found: list[str] = []
        for edge in self.incoming[node_id]:
            source = self.nodes[edge.source]
            if source.id in seen or node_id in self.delegations[source.id]:
                continue
            if source.type in CONTAINERS and edge.handle == NEXT:
                found.append(str(source.data.get("as") or "item"))
            elif self.owner.get(source.id) == node_id:
                continue  # a body's end leading back to its container: the container's message is from before
            elif source.id in self.keys:
                found.append(f"context.{self.keys[source.id]}")
            else:
                found.extend(self.last_message(source.id, seen | {node_id}))
        if not found and not seen:
            self.flow_inputs.setdefault(MESSAGE, {"type": "string", "description": "The request the flow works on."})
            found.append(f"inputs.{MESSAGE}")
        return list(dict.fromkeys(found))

    def message_binding(self, node: Node, parallel: bool) -> str:
        found = self.last_message(node.id) or [f"inputs.{MESSAGE}"]
        if len(found) == 1:
            return "{{ " + found[0] + " }}"
        if parallel:  # all of them ran: read them all
            return "\n\n".join("{{ " + expr + " }}" for expr in found)
        # one of several ways led here: the message of the way that ran
        keyed = [e for e in found if e.startswith("context.")]
        rest = [e for e in found if not e.startswith("context.")]
        text = rest[0] if rest else "''"
        for expr in reversed(keyed):
            text = f"{expr} | default({text})"
        return "{{ " + text + " }}"

    # ---- steps ---------------------------------------------------------------------------

    def steps(self, regions: dict[str | None, Region], owner: str | None) -> list[dict[str, Any]]:
        region = regions[owner]
        members = set(region.members)
        delegated = {t for m in region.members for t in self.delegations[m]}
        for target in delegated:
            if self.plain_in(target):
                self.fail(f"node '{target}': a sub-agent (an agent's edge leads to it) cannot also follow "
                          "another node (an edge from an agent to an agent delegates; mark one that means "
                          "'then' with data.kind: next)")
        sequence_out = {m: self.sequence_targets(m) for m in region.members}
        needs: set[str] = set()
        changed = True
        while changed:
            changed = False
            for m in region.members:
                outs = [t for t in sequence_out[m] if t in members]
                if (len(outs) > 1 or m in needs) and m not in delegated:
                    for t in outs:
                        if t not in needs:
                            needs.add(t)
                            changed = True
        order = self.order(region, sequence_out, needs, delegated)
        steps: list[dict[str, Any]] = []
        for position, node_id in enumerate(order):
            node = self.nodes[node_id]
            follower = order[position + 1] if position + 1 < len(order) else None
            step = self.step(node, regions, node_id in needs)
            if node_id == region.entry and position != 0:
                step["start"] = True
            if node_id in needs:
                step["needs"] = [e.source for e in self.sequence_in(node_id)]
                step["needs"] = [self.nodes[s].step for s in dict.fromkeys(step["needs"])]
            elif node_id not in delegated:
                self.place_successor(node, step, sequence_out[node_id], follower, needs, delegated, members)
            steps.append(step)
        return steps

    def plain_in(self, node_id: str) -> list[Edge]:
        return [e for e in self.incoming[node_id] if e in self.plain[e.source]]

    def sequence_targets(self, node_id: str) -> list[str]:
        """Where a node goes when it has run (plain edges; a container's COMPLETE)."""
        node = self.nodes[node_id]
        edges = [*self.plain[node_id], *(e for e in self.handled[node_id] if e.handle == COMPLETE)]
        targets: list[str] = []
        for edge in edges:
            target = self.nodes[edge.target]
            targets.append(END if target.type == "end" or edge.target == self.owner.get(node_id) else target.id)
        if node.type in CONTAINERS and len([e for e in edges if e.handle == COMPLETE]) > 1:
            self.fail(f"{node.type} '{node_id}': several COMPLETE edges; one node follows it")
        return list(dict.fromkeys(targets))

    def sequence_in(self, node_id: str) -> list[Edge]:
        return [e for e in self.incoming[node_id]
                if e in self.plain[e.source] or (e.handle == COMPLETE and e in self.handled[e.source])]

    def order(self, region: Region, sequence_out: dict[str, list[str]], needs: set[str],
              delegated: set[str]) -> list[str]:
        """The step list: the entry first, each node before what it leads to where possible, a node
        whose followers all wait for it (`needs`) right before one of them."""
        walked: list[str] = []
        pending = [region.entry]
        members = set(region.members)
        while pending or len(walked) < len(members):
            if not pending:
                pending = [next(m for m in region.members if m not in walked)]
            current = pending.pop()
            if current in walked or current not in members:
                continue
            walked.append(current)
            later = [t for t in self.successors(current) if t in members and t not in walked]
            pending.extend(reversed(sorted(later, key=lambda t: t not in needs)))
        regular = [n for n in walked if n not in needs and n not in delegated]
        waiting = [n for n in walked if n in needs]
        sources = [n for n in regular if sequence_out[n] and all(t in needs for t in sequence_out[n])]
        order = [n for n in regular if n not in sources]
        for source in sources:
            order.append(source)
            own = next((t for t in sequence_out[source] if t in waiting), None)
            if own is None and waiting:
                own = waiting[0]
            if own is not None:
                waiting.remove(own)
                order.append(own)
        order.extend(waiting)
        order.extend(n for n in walked if n in delegated)
        return order

    def place_successor(self, node: Node, step: dict[str, Any], targets: list[str], follower: str | None,
                        needs: set[str], delegated: set[str], members: set[str]) -> None:
        """`goto` where list order would not say it."""
        if node.type == "router" or any(t in needs for t in targets):
            return
        if not targets:
            if "branches" in step and self.branches_cover(step):
                return
            if follower is not None and follower not in needs:
                step["goto"] = END
            return
        (target,) = targets[:1]
        if len(targets) > 1:
            return
        shown = END if target == END else self.nodes[target].step
        if target != END and target == follower:
            return
        step["goto"] = shown

    def branches_cover(self, step: dict[str, Any]) -> bool:
        block = self.placer.exists(str(step.get("uses") or ""))
        if block is None or len(block.outputs) != 1:
            return False
        (spec,) = block.outputs.values()
        return spec.enum is not None and all(enum_text(v) in step["branches"] for v in spec.enum)

    def target_of(self, edge: Edge, source: Node) -> str:
        target = self.nodes[edge.target]
        if target.type == "end" or edge.target == self.owner.get(source.id):
            return END
        return target.step

    def step(self, node: Node, regions: dict[str | None, Region], parallel: bool) -> dict[str, Any]:
        data = node.data
        step: dict[str, Any] = {"id": node.step}
        kind = node.type
        if data.get("block") is not None and kind in ("agent", "tool", "smart_node", "block"):
            ref = str(data["block"])
            if self.placer.exists(ref) is None:
                self.fail(f"node '{node.id}': block '{ref}' is not a block of the yard")
            step["uses"] = ref
            if kind == "tool" and "args" in data:
                step["with"] = data["args"]
        elif kind == "agent":
            self.agent(node, step, parallel)
        elif kind == "tool":
            self.tool(node, step)
        elif kind == "smart_node":
            self.smart(node, step, parallel)
        elif kind == "block":
            self.fail(f"node '{node.id}': a block node names its block in data.block")
        elif kind == "router":
            step["router"] = self.router(node, parallel)
        elif kind in CONTAINERS:
            self.container(node, step, regions)
        elif kind == "approval":
            step["approval"] = {k: v for k, v in data.items() if k in ("message", "fields", "approvers", "timeout",
                                                                         "on_timeout", "on_reject")}
        elif kind == "subflow":
            if not isinstance(data.get("flow"), str):
                self.fail(f"node '{node.id}': a subflow node names its flow in data.flow")
            step["flow"] = data.get("flow")
        own = as_dict(data.get("step"))
        for key in STEP_KEYS:
            if key in own and key not in step:
                step[key] = own[key]
        if data.get("require_approval") not in (None, False):
            step["require_approval"] = data["require_approval"]
        if kind == "tool" and data.get("block") is None:
            step.pop("with", None)
            step["with"] = self.tool_args(node)
        self.exits(node, step)
        delegates = [self.nodes[t].step for t in self.delegations[node.id]]
        if delegates:
            step["delegates"] = list(dict.fromkeys([*step.get("delegates", []), *delegates]))
        if not step.get("with"):
            step.pop("with", None)
        return step

    def exits(self, node: Node, step: dict[str, Any]) -> None:
        branches: dict[str, str] = {}
        for edge in self.handled[node.id]:
            handle = edge.handle or ""
            target = self.target_of(edge, node)
            if handle.startswith(BRANCH):
                branches[handle.removeprefix(BRANCH)] = target
            elif handle == "max_visits":
                step["on_max_visits"] = target
            elif handle in ("reject", "timeout"):
                key = EXITS[handle]
                if "approval" in step:
                    step["approval"][key] = target
                else:
                    gate = step.get("require_approval")
                    gate = dict(gate) if isinstance(gate, dict) else {}
                    gate[key] = target
                    step["require_approval"] = gate
        if branches:
            step["branches"] = branches

    # ---- node kinds ----------------------------------------------------------------------

    def variables(self, node: Node, text: str) -> list[str]:
        try:
            found = references(text)
        except TemplateError as exc:
            self.fail(f"node '{node.id}': {exc}")
            return []
        return list(dict.fromkeys(path[0] for path in found))

    def declare_input(self, name: str) -> None:
        if name not in self.keys.values() and name != MESSAGE:
            self.flow_inputs.setdefault(name, {"type": "string"})

    def agent(self, node: Node, step: dict[str, Any], parallel: bool) -> None:
        data = node.data
        system = data.get("system_prompt")
        if system is not None and not isinstance(system, str):
            self.fail(f"agent '{node.id}': `system_prompt` must be text")
            system = None
        tools = data.get("tools") or []
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            self.fail(f"agent '{node.id}': `tools` must be a list of names")
            tools = []
        agents = {n.id for n in self.nodes.values() if n.type == "agent"}
        agents.update(n.label for n in self.nodes.values() if n.type == "agent")
        own_tools = [t for t in tools if t not in agents]
        variables = self.variables(node, system or "")
        inputs: dict[str, Any] = {MESSAGE: {"type": "string", "description": "The task."}}
        for name in variables:
            inputs.setdefault(name, {"type": "string"})
            self.declare_input(name)
        block: dict[str, Any] = {"description": node.label, "kind": "agent", "inputs": inputs,
                                 "outputs": {"answer": {"type": "string", "description": "The agent's answer."}},
                                 "prompt": {**({"system": system} if system else {}), "user": "{{ message }}"}}
        if own_tools:
            block["tools"] = own_tools
        self.model_settings(node, block)
        if data.get("max_iterations") is not None:
            block["max_iterations"] = data["max_iterations"]
        step["uses"] = self.placer.place(slug(node.label, "agent"), block)
        sub_agent = any(node.id in self.delegations[n] for n in self.nodes)
        if not sub_agent:  # a sub-agent is given its message by the agent that calls it, and answers it
            step["with"] = {MESSAGE: self.message_binding(node, parallel)}
            step["outputs"] = {"answer": self.keys[node.id]}

    def model_settings(self, node: Node, block: dict[str, Any]) -> None:
        profile = node.data.get("profile")
        if profile is not None:
            if not isinstance(profile, str):
                self.fail(f"node '{node.id}': `profile` names a model profile of blockyard.yaml")
            else:
                block["model"] = profile

    def tool(self, node: Node, step: dict[str, Any]) -> None:
        name = node.data.get("tool")
        if not isinstance(name, str) or not name:
            self.fail(f"tool '{node.id}': data.tool names the tool it calls")
            return
        args = self.tool_args(node)
        block = {"description": node.data.get("label") or f"Call the {name} tool.", "kind": "tool", "tool": name,
                 "inputs": {arg: {"type": "any"} for arg in args},
                 "outputs": {"result": {"type": "any", "description": f"What {name} returned."}}}
        step["uses"] = self.placer.place(slug(name, "tool") if not node.data.get("label") else slug(node.label),
                                         block)
        step["outputs"] = {"result": self.keys[node.id]}

    def tool_args(self, node: Node) -> dict[str, Any]:
        args = node.data.get("args") or {}
        if not isinstance(args, dict):
            self.fail(f"tool '{node.id}': `args` must be an object")
            return {}
        return args

    def smart(self, node: Node, step: dict[str, Any], parallel: bool) -> None:
        data = node.data
        declared: dict[str, dict[str, Any]] = {}
        for side in ("inputs", "outputs"):
            fields = data.get(side) or []
            if not isinstance(fields, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str)
                                                       for f in fields):
                self.fail(f"smart_node '{node.id}': `{side}` must be a list of {{name, desc}}")
                fields = []
            declared[side] = {f["name"]: {"type": f.get("type") or "string",
                                          **({"description": f["desc"]} if f.get("desc") else {})} for f in fields}
        if not declared["outputs"]:
            self.fail(f"smart_node '{node.id}': no outputs; a smart node predicts at least one")
        mode = data.get("mode", "Predict")
        modes = {"Predict": "predict", "ChainOfThought": "chain_of_thought"}
        if mode not in modes:
            self.fail(f"smart_node '{node.id}': mode {json.dumps(mode)} (known: Predict, ChainOfThought)")
            mode = "Predict"
        goal = data.get("goal")
        block: dict[str, Any] = {"description": node.label, "kind": "smart", "inputs": declared["inputs"],
                                 "outputs": declared["outputs"], "mode": modes[mode]}
        if isinstance(goal, str) and goal:
            block["prompt"] = {"system": goal}
        guardrails = data.get("guardrails")
        if guardrails is not None:
            if not isinstance(guardrails, dict):
                self.fail(f"smart_node '{node.id}': `guardrails` is an object {{shape, max_length, attempts}}")
            else:
                block["guardrails"] = guardrails
        self.model_settings(node, block)
        step["uses"] = self.placer.place(slug(node.label, "smart"), block)
        bound: dict[str, Any] = {}
        for name in declared["inputs"]:
            if name == MESSAGE:
                bound[name] = self.message_binding(node, parallel)
            else:
                self.declare_input(name)
        if bound:
            step["with"] = bound

    def router(self, node: Node, parallel: bool) -> dict[str, Any]:
        data = node.data
        by_handle: dict[str, str] = {}
        for edge in self.handled[node.id]:
            if edge.handle not in EXITS:
                if edge.handle in by_handle:
                    self.fail(f"router '{node.id}': two edges leave by handle '{edge.handle}'")
                by_handle[str(edge.handle)] = self.target_of(edge, node)
        routes: list[dict[str, Any]] = []
        for route in data.get("routes") or []:
            if isinstance(route, dict) and route.get("condition") in CONDITIONS:
                routes.append({str(route["condition"]): route.get("value"),
                               "goto": by_handle.get(str(route.get("target_handle")), END)})
        default = data.get("default_handle")
        spec: dict[str, Any] = {}
        if "value" in data:  # a template (an exported router); null: the rules are expressions
            if data["value"] is not None:
                spec["value"] = data["value"]
        elif isinstance(data.get("field"), str) and data["field"]:
            spec["value"] = "{{ context." + data["field"] + " }}"
        elif any(next(iter(r)) != "expr" for r in routes):
            spec["value"] = self.message_binding(node, parallel)
        spec["routes"] = routes
        spec["default"] = by_handle.get(str(default), END) if default else END
        return spec

    def container(self, node: Node, step: dict[str, Any], regions: dict[str | None, Region]) -> None:
        data = node.data
        body = self.steps(regions, node.id) if node.id in regions else None
        if node.type == "iterator":
            items = data.get("items")
            if not isinstance(items, str) or not items:
                self.fail(f"iterator '{node.id}': data.items names the context key holding the list")
                items = "items"
            expression = items if "." in items or "[" in items else f"context.{items}"
            spec = {"items": expression, "as": data.get("as") or "item", "steps": body or []}
            if data.get("collect"):
                spec["collect"] = data["collect"]
            step["foreach"] = spec
        elif node.type == "loop":
            spec = {k: data[k] for k in ("until", "max_iterations", "on_exhausted") if k in data}
            spec.setdefault("max_iterations", 3)
            step["loop"] = {**spec, "steps": body or []}
        else:
            spec = {k: data[k] for k in ("items", "as", "uses", "with", "max_concurrency", "collect") if k in data}
            if body is not None:
                spec["steps"] = body
            step["map"] = spec

