"""The control graph of a region: which step can follow which, and where the document says so.

Semantics (docs/flows.md, "How steps follow each other"):
- a step without `needs` follows the step before it in the list, unless that step chooses its
  successor itself (`goto`, `router`, or `branches` covering every value of the decide enum);
- a step with `needs` waits for exactly those steps; they all fan out to it;
- a step that continues in order but has no follower ends its region (the run, or one pass of a
  body);
- exits taken without running the step's work: approval `on_reject` and `on_timeout`, and
  `on_max_visits` once the bound is reached. `fail` ends the run and is no edge.
Edges to unknown steps are left out: the reference checks report them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.definitions.load import JsonPath
from engine.spec import END, ApprovalSpec
from engine.spec.flow import enum_text
from engine.validate.semantic.index import Region, StepNode

CONCURRENT = frozenset({"order", "needs"})  # edges taken together (a fan-out runs them in parallel)


@dataclass(frozen=True)
class Edge:
    """source -> target (a step id or END); `ran` is False for exits that skip the step's work."""

    source: str
    target: str
    kind: str  # order | needs | goto | branch | route | reject | timeout | max_visits
    path: JsonPath
    ran: bool = True


@dataclass
class ControlGraph:
    region: Region
    entry: str | None
    edges: list[Edge] = field(default_factory=list)
    out: dict[str, list[Edge]] = field(default_factory=dict)
    into: dict[str, list[Edge]] = field(default_factory=dict)
    forward: bool = (
        True  # every edge goes down the list: no cycles, one pass of each analysis suffices
    )

    def add(self, edge: Edge) -> None:
        self.edges.append(edge)
        self.out.setdefault(edge.source, []).append(edge)
        self.into.setdefault(edge.target, []).append(edge)

    def successors(self) -> dict[str, list[str]]:
        """node -> distinct targets, END included as a node."""
        distinct: dict[str, dict[str, None]] = {node.id: {} for node in self.region.steps}
        distinct.setdefault(END, {})
        for edge in self.edges:
            distinct[edge.source][edge.target] = None  # a dict keeps the first-seen order
        return {node: list(targets) for node, targets in distinct.items()}

    def fan_outs(self) -> Iterator[tuple[str, list[str]]]:
        """Steps that start several steps at once, with those steps."""
        for source, edges in self.out.items():
            arms = list(
                dict.fromkeys(e.target for e in edges if e.kind in CONCURRENT and e.target != END)
            )
            if len(arms) > 1:
                yield source, arms


def decide_values(node: StepNode) -> list[str] | None:
    """The branch keys a decide step can take (its enum as text), or None when unknown."""
    block = node.runs_block
    if block is None or block.kind != "decide" or len(block.outputs) != 1:
        return None
    (output,) = block.outputs.values()
    if not output.enum:
        return None
    return [enum_text(value) for value in output.enum]


def continues_in_order(node: StepNode) -> bool:
    """False when the step names its own successor (goto, router, complete branches)."""
    spec = node.spec
    if spec.router is not None or spec.goto is not None:
        return False
    if spec.branches is not None:
        values = decide_values(node)
        return values is not None and any(v not in spec.branches for v in values)
    return True


def build(region: Region) -> ControlGraph:
    """The control graph of one region."""
    entry = region.entry
    graph = ControlGraph(region, entry.id if entry is not None else None)
    needed_by: dict[str, list[tuple[StepNode, int]]] = {}
    for node in region.steps:
        for position, name in enumerate(node.spec.needs):
            needed_by.setdefault(name, []).append((node, position))
    for node in region.steps:
        for edge in _edges(region, node, needed_by.get(node.id, [])):
            if edge.target == END:
                graph.add(edge)
            elif edge.target in region.by_id:
                graph.add(edge)
                if region.by_id[edge.target].index <= node.index:
                    graph.forward = False
    return graph


def _edges(region: Region, node: StepNode, needed_by: list[tuple[StepNode, int]]) -> Iterator[Edge]:
    spec = node.spec
    source = node.id
    if spec.router is not None:
        for position, route in enumerate(spec.router.routes):
            yield Edge(source, route.goto, "route", node.at("router", "routes", position, "goto"))
        yield Edge(source, spec.router.default, "route", node.at("router", "default"))
    elif spec.goto is not None:
        yield Edge(source, spec.goto, "goto", node.at("goto"))
    if spec.branches is not None and spec.router is None:
        for value, target in spec.branches.items():
            yield Edge(source, target, "branch", node.at("branches", value))
    for waiting, position in needed_by:
        yield Edge(source, waiting.id, "needs", waiting.at("needs", position))
    if continues_in_order(node):
        follower = region.next_after(node)
        if follower is not None and not follower.spec.needs:
            yield Edge(source, follower.id, "order", follower.at("id"))
        elif not needed_by:
            yield Edge(source, END, "order", node.at("id"))
    yield from _gate_edges(node)
    if spec.max_visits is not None and spec.on_max_visits != "fail":
        yield Edge(source, spec.on_max_visits, "max_visits", node.at("on_max_visits"), ran=False)


def _gate_edges(node: StepNode) -> list[Edge]:
    """Where a step's gates (`approval:`, `require_approval:`) lead when rejected or timed out; the step
    did not run then (`ran=False`)."""
    spec, source = node.spec, node.id
    gates = [(spec.approval, ("approval",))]
    if isinstance(spec.require_approval, ApprovalSpec):
        gates.append((spec.require_approval, ("require_approval",)))
    elif spec.require_approval:
        gates.append((ApprovalSpec(), ("require_approval",)))
    found: list[Edge] = []
    for gate, where in gates:
        if gate is None:
            continue
        if gate.on_reject != "fail":
            found.append(
                Edge(source, gate.on_reject, "reject", node.at(*where, "on_reject"), ran=False)
            )
        if gate.on_timeout not in ("approve", "reject"):
            found.append(
                Edge(source, gate.on_timeout, "timeout", node.at(*where, "on_timeout"), ran=False)
            )
    return found
