"""A flow's graph as data: the nodes people see (steps, routers, loop checks, iterators, maps, gates,
subflows, start and end) and the edges between them, each with a kind — computed from the spec
(a pinned Bundle), not from the LangGraph graph, which is full of the engine's helper nodes.

One model, several renderers (engine/compile/draw.py: Mermaid, DOT, JSON); `blockyard graph`, the
server's `GET /flows/{name}` and the web page all read it. It carries what a visual editor needs:
stable ids, kinds, labels, the groups that loop/foreach/map bodies form, and for routers and decide
steps one source handle per way out, which the edges leaving by it name. Deterministic (step
order), so drawings can be diffed. The bundle validated: targets resolve (engine/compile/topology.py).

Node kinds: start, end, step (a block step; `data.kind` is the block's kind), decide (a decide
step with branches), router, loop (a loop's check), foreach (its iterator), map (the fan-out),
join (where a map's items meet), gate (an approval step), subflow. Edge kinds: next (list order,
goto, needs, a body's end), branch (a decide value), route (a router rule), default (a router's
default, decide values without a branch), loop-back (a loop's next pass; `bound` is its
max_iterations), iterate (a foreach's next item), fan-out (a map's items), join (a barrier of
needs, or a map item's end), exit (taken without running the step: `on_max_visits` — `bound` is
max_visits — an approval's reject or timeout), delegate (an agent's sub-agents).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.compile.delegates import split_delegated
from engine.compile.topology import EXIT, Plan, plan_region
from engine.definitions.pinned import Bundle
from engine.spec import AgentBlock, BlockSpec, ForeachSpec, LoopSpec, MapSpec, Route, StepSpec
from engine.spec.decisions import gate_spec

START_ID, END_ID = "__start__", "__end__"
DASHED = frozenset({"exit", "delegate"})  # edges not taken by running the step itself


@dataclass
class Handle:
    """One way out of a router or decide node: the edges leaving by it name its id."""

    id: str
    label: str


@dataclass
class GraphNode:
    id: str
    kind: str
    lines: list[str]  # the text drawn in the node: the step id first
    shape: str  # box | diamond | hexagon | subroutine | parallelogram | terminal | circle
    group: str | None = None  # the id of the Group it sits in
    step: str | None = None  # the step it stands for (events name it), None for start, end, join
    # what the kind knows: block, flow, bounds, ...
    data: dict[str, Any] = field(default_factory=dict)
    handles: list[Handle] = field(default_factory=list)

    @property
    def label(self) -> str:
        return "\n".join(self.lines)


@dataclass
class GraphEdge:
    id: str
    source: str
    target: str
    kind: str
    label: str | None = None
    handle: str | None = None  # the source handle (routers and decide steps)
    bound: int | None = None  # loop-back: max_iterations; exit by on_max_visits: max_visits

    @property
    def dashed(self) -> bool:
        return self.kind in DASHED


@dataclass
class Group:
    """The body of a loop, foreach or map step, drawn as a cluster around its nodes."""

    id: str
    key: str  # the cluster's name in the drawings (the step id, or `<id>__body` for a map body)
    kind: str  # loop | foreach | map
    label: str
    step: str
    parent: str | None = None
    # ("node" | "group", id), in drawing order
    members: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class FlowGraph:
    flow: str
    direction: str = "TD"
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    members: list[tuple[str, str]] = field(default_factory=list)  # the top level, in drawing order

    def node(self, node_id: str) -> GraphNode:
        return next(node for node in self.nodes if node.id == node_id)

    def group(self, group_id: str) -> Group:
        return next(group for group in self.groups if group.id == group_id)


def flow_graph(bundle: Bundle) -> FlowGraph:
    """The graph of a bundle's flow."""
    graph = FlowGraph(bundle.name)
    builder = _Builder(bundle, graph)
    builder.add(GraphNode(START_ID, "start", ["start"], "terminal"), None)
    entry = builder.region(bundle.flow.steps, None, END_ID, "the flow")
    builder.add(GraphNode(END_ID, "end", ["end"], "terminal"), None)
    graph.edges.insert(0, GraphEdge("", START_ID, entry, "next"))
    for number, edge in enumerate(graph.edges):
        edge.id = f"e{number}"
    return graph


class _Builder:
    def __init__(self, bundle: Bundle, graph: FlowGraph) -> None:
        self.blocks: Mapping[str, BlockSpec] = bundle.blocks
        self.where = f"flow '{bundle.name}'"
        self.graph = graph

    def add(self, node: GraphNode, group: Group | None) -> GraphNode:
        node.group = group.id if group is not None else None
        self.graph.nodes.append(node)
        (group.members if group is not None else self.graph.members).append(("node", node.id))
        return node

    def open(self, group: Group, parent: Group | None) -> Group:
        group.parent = parent.id if parent is not None else None
        self.graph.groups.append(group)
        (parent.members if parent is not None else self.graph.members).append(("group", group.id))
        return group

    def edge(
        self,
        source: str,
        target: str,
        kind: str,
        label: str | None = None,
        *,
        handle: str | None = None,
        bound: int | None = None,
    ) -> None:
        self.graph.edges.append(GraphEdge("", source, target, kind, label, handle, bound))

    def region(
        self,
        steps: list[StepSpec],
        group: Group | None,
        exit_id: str,
        describe: str,
        exit_kind: str = "next",
    ) -> str:
        """Add `steps` into `group`; their ends go to `exit_id` by `exit_kind` edges. Returns the entry node."""
        steps, delegated = split_delegated(steps, self.blocks, self.where)
        plan = plan_region(steps, self.blocks, self.where, describe)
        ends: dict[str, tuple[str, str]] = {step.id: self.step(step, group) for step in steps}
        for sub in delegated.values():  # sub-agents: reached only through their agent's calls
            self.add(self._simple(sub, _bound(sub)), group).data["delegated"] = True
        for step in [*steps, *delegated.values()]:
            for name in step.delegates:
                if name in delegated:
                    self.edge(
                        ends[step.id][0] if step.id in ends else step.id,
                        name,
                        "delegate",
                        "delegates",
                    )

        def resolve(target: str) -> str:
            return exit_id if target == EXIT else ends[target][0]

        def ordinary(target: str) -> str:
            return exit_kind if target == EXIT else "next"

        for step in steps:
            entry, out = ends[step.id]
            self._ways_on(step, out, plan, resolve, ordinary)
            self._ways_out(step, entry, resolve)
            if step.router is not None or step.branches is not None:
                self._handles(out)
        for needs, waiting in plan.barriers:
            for name in needs:
                self.edge(ends[name][1], ends[waiting][0], "join")
        return ends[plan.entry][0]

    def _ways_on(
        self,
        step: StepSpec,
        out: str,
        plan: Plan,
        resolve: Callable[[str], str],
        ordinary: Callable[[str], str],
    ) -> None:
        """The edges a finished step follows: its routes or branches, else its next steps, and its dependents."""
        if step.router is not None:
            for number, route in enumerate(step.router.routes, 1):
                self.edge(
                    out, resolve(route.goto), "route", route_label(route), handle=f"route-{number}"
                )
            self.edge(out, resolve(step.router.default), "default", "default", handle="default")
        if step.branches is not None:
            for value, target in step.branches.items():
                self.edge(out, resolve(target), "branch", value, handle=f"branch-{value}")
            for target in plan.following[step.id]:
                self.edge(out, resolve(target), "default", "other", handle="other")
        elif step.router is None:
            done = "done" if step.loop is not None or step.foreach is not None else None
            for target in plan.following[step.id]:
                self.edge(out, resolve(target), ordinary(target), done)
        for target in plan.dependents[step.id]:
            self.edge(out, resolve(target), "next")

    def _ways_out(self, step: StepSpec, entry: str, resolve: Callable[[str], str]) -> None:
        """The exits a step takes before it runs: too many visits, a rejected or timed-out gate."""
        if step.max_visits is not None and step.on_max_visits != "fail":
            self.edge(
                entry,
                resolve(step.on_max_visits),
                "exit",
                f"after {step.max_visits} visits",
                bound=step.max_visits,
            )
        gate = step.approval or gate_spec(step)
        if gate is not None and gate.on_reject != "fail":
            self.edge(entry, resolve(gate.on_reject), "exit", "reject")
        if (
            gate is not None
            and gate.timeout is not None
            and gate.on_timeout not in ("approve", "reject")
        ):
            self.edge(entry, resolve(gate.on_timeout), "exit", f"timeout {gate.timeout}")

    def _handles(self, out: str) -> None:
        """The ways out of a router or decide node, in the order of its edges."""
        handles: dict[str, str] = {}
        for edge in self.graph.edges:
            if edge.source == out and edge.handle is not None:
                handles.setdefault(edge.handle, edge.label or edge.handle)
        if handles:
            self.graph.node(out).handles = [Handle(key, label) for key, label in handles.items()]

    def step(self, step: StepSpec, group: Group | None) -> tuple[str, str]:
        """Add one step; returns (node its predecessors point to, node its successors leave from)."""
        bound = _bound(step)
        visits: dict[str, Any] = (
            {"max_visits": step.max_visits} if step.max_visits is not None else {}
        )
        if step.loop is not None:
            return self._loop(step, step.loop, group, bound, visits)
        if step.foreach is not None:
            return self._foreach(step, step.foreach, group, bound, visits)
        if step.map is not None:
            return self._map(step, step.map, group, bound, visits)
        node = self.add(self._simple(step, bound), group)
        return node.id, node.id

    def _loop(
        self,
        step: StepSpec,
        loop: LoopSpec,
        group: Group | None,
        bound: str,
        visits: dict[str, Any],
    ) -> tuple[str, str]:
        body = self.open(
            Group(f"{step.id}__cluster", step.id, "loop", f"loop {step.id}{bound}", step.id),
            group,
        )
        check = GraphNode(
            f"{step.id}__check",
            "loop",
            [f"until {loop.until}" if loop.until else "repeat", f"max {loop.max_iterations}"],
            "hexagon",
            step=step.id,
            data={"until": loop.until, "max_iterations": loop.max_iterations, **visits},
        )
        entry = self.region(loop.steps, body, check.id, f"the loop body of step '{step.id}'")
        self.add(check, body)
        self.edge(check.id, entry, "loop-back", "again", bound=loop.max_iterations)
        return entry, check.id

    def _foreach(
        self,
        step: StepSpec,
        each: ForeachSpec,
        group: Group | None,
        bound: str,
        visits: dict[str, Any],
    ) -> tuple[str, str]:
        title = f"for each {each.as_} in {each.items}" + (
            f" → {each.collect}" if each.collect else ""
        )
        body = self.open(
            Group(f"{step.id}__cluster", step.id, "foreach", f"foreach {step.id}{bound}", step.id),
            group,
        )
        iterator = self.add(
            GraphNode(
                step.id,
                "foreach",
                [step.id, title],
                "hexagon",
                step=step.id,
                data={"items": each.items, "as": each.as_, "collect": each.collect, **visits},
            ),
            body,
        )
        entry = self.region(each.steps, body, iterator.id, f"the foreach body of step '{step.id}'")
        self.edge(iterator.id, entry, "iterate", "next")
        return iterator.id, iterator.id

    def _map(
        self,
        step: StepSpec,
        fan_out: MapSpec,
        group: Group | None,
        bound: str,
        visits: dict[str, Any],
    ) -> tuple[str, str]:
        lines = [step.id, f"map {fan_out.as_} in {fan_out.items}"]
        if fan_out.uses:
            lines.append(f"uses {fan_out.uses}")
        if fan_out.max_concurrency:
            lines.append(f"max {fan_out.max_concurrency} at once")
        if fan_out.collect:
            lines.append(f"→ {fan_out.collect}")
        data = {
            "items": fan_out.items,
            "as": fan_out.as_,
            "uses": fan_out.uses,
            "max_concurrency": fan_out.max_concurrency,
            "collect": fan_out.collect,
            **visits,
        }
        fan = self.add(
            GraphNode(
                step.id,
                "map",
                lines + ([bound.strip(" ,")] if bound else []),
                "parallelogram",
                step=step.id,
                data=data,
            ),
            group,
        )
        if fan_out.steps is None:
            return fan.id, fan.id
        body = self.open(
            Group(
                f"{step.id}__body__cluster",
                f"{step.id}__body",
                "map",
                f"each {fan_out.as_}",
                step.id,
            ),
            group,
        )
        join = GraphNode(f"{step.id}__join", "join", ["join"], "circle")
        entry = self.region(
            fan_out.steps, body, join.id, f"the map body of step '{step.id}'", exit_kind="join"
        )
        self.add(join, group)
        self.edge(fan.id, entry, "fan-out", "each item")
        return fan.id, join.id

    def _simple(self, step: StepSpec, bound: str) -> GraphNode:
        data: dict[str, Any] = (
            {"max_visits": step.max_visits} if step.max_visits is not None else {}
        )
        if step.require_approval is not False:
            bound += ", after approval"
            data["after_approval"] = True
        if step.router is not None:
            return GraphNode(
                step.id, "router", [step.id, "router" + bound], "diamond", step=step.id, data=data
            )
        accumulates = _accumulates(step)
        if accumulates:
            data["accumulates"] = accumulates
        if step.flow is not None:
            return GraphNode(
                step.id,
                "subflow",
                [step.id, f"flow {step.flow}{bound}", *_accumulates_line(step)],
                "subroutine",
                step=step.id,
                data={"flow": step.flow, **data},
            )
        if step.approval is not None:
            return GraphNode(
                step.id, "gate", [step.id, f"approval{bound}"], "hexagon", step=step.id, data=data
            )
        block = self.blocks.get(step.uses or "")
        kind = block.kind if block is not None else "block"
        lines = [step.id, f"{kind} {step.uses}{bound}"]
        data = {"block": step.uses, "kind": kind, **data}
        if isinstance(block, AgentBlock):
            tools = [*step.delegates, *block.delegates, *block.tools]
            if tools:
                lines.append("tools: " + ", ".join(dict.fromkeys(tools)))
                data["tools"] = list(dict.fromkeys(tools))
        lines.extend(_accumulates_line(step))
        node_kind = "decide" if kind == "decide" and step.branches is not None else "step"
        return GraphNode(
            step.id,
            node_kind,
            lines,
            "diamond" if kind == "decide" else "box",
            step=step.id,
            data=data,
        )


def _accumulates(step: StepSpec) -> dict[str, str]:
    """The context keys a step accumulates (`reduce:`) and how: {key: append | merge}."""
    found: dict[str, str] = {}
    for name in step.outputs:
        mode = step.output_reduce(name)
        if mode is not None:
            found[step.output_key(name)] = mode
    return found


def _accumulates_line(step: StepSpec) -> list[str]:
    """The line naming the context keys a step accumulates, if any."""
    found = _accumulates(step)
    return (
        ["accumulates " + ", ".join(f"{key} ({mode})" for key, mode in found.items())]
        if found
        else []
    )


def _bound(step: StepSpec) -> str:
    if step.max_visits is None:
        return ""
    then = " then fail" if step.on_max_visits == "fail" else ""
    return f", max {step.max_visits} visits{then}"


def route_label(route: Route) -> str:
    """How a router rule reads on its edge: `regex ^err`, `starts with x`."""
    return f"{route.kind.replace('_', ' ')} {route.condition}"
