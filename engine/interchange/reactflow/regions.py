"""The entry and the regions: the node the flow starts at, and which step list (the flow's, or a
container's body) each node belongs to; an edge may not cross from one to another."""

from __future__ import annotations

from engine.interchange.reactflow.edges import EdgeClassifier
from engine.interchange.reactflow.model import COMPLETE, CONTAINERS, END, NEXT, Edge, Node, Region


class RegionFinder(EdgeClassifier):
    """The entry node, each node's region, and the step an edge leads to."""

    def entry(self) -> str:
        starts = [n.id for n in self.nodes.values() if n.data.get("isStart") is True]
        if len(starts) > 1:
            self.fail(
                f"{len(starts)} start nodes: {', '.join(repr(s) for s in starts)} (data.isStart "
                "marks one entry)"
            )
            return ""
        if starts:
            if self.nodes[starts[0]].type == "end":
                self.fail(f"node '{starts[0]}': an end node cannot be the start")
            return starts[0]
        free = [n.id for n in self.nodes.values() if not self.incoming[n.id] and n.type != "end"]
        if len(free) == 1:
            return free[0]
        if not free:
            self.fail(
                "no start node: every node has an incoming edge; mark the entry with data.isStart: true"
            )
        else:
            self.fail(
                f"no start node: {len(free)} nodes have no incoming edge "
                f"({', '.join(repr(f) for f in free)}); mark the entry with data.isStart: true"
            )
        return ""

    def successors(self, node_id: str) -> list[str]:
        return [
            *(e.target for e in self.plain[node_id]),
            *(e.target for e in self.handled[node_id]),
            *self.delegations[node_id],
        ]

    def regions(self, entry: str) -> dict[str | None, Region]:
        """Every node's step list: the flow's, or its innermost container's body."""
        bodies: dict[str, set[str]] = {}
        for node in self.nodes.values():
            nexts = [e for e in self.handled[node.id] if e.handle == NEXT]
            if not nexts:
                continue
            body = bodies[node.id] = self._body(node, nexts[0].target)
            self._check_body(node, body, entry)
        owner: dict[str, str | None] = {}
        for node_id in self.nodes:
            holders = [c for c, body in bodies.items() if node_id in body]
            owner[node_id] = min(holders, key=lambda c: len(bodies[c])) if holders else None
        self._check_nesting(bodies)
        regions: dict[str | None, Region] = {None: Region(None, entry)}
        for container in bodies:
            first = next(e.target for e in self.handled[container] if e.handle == NEXT)
            regions[container] = Region(container, first)
        for node_id, node in self.nodes.items():
            if node.type != "end":
                regions[owner[node_id]].members.append(node_id)
        self.owner = owner
        for edge in self.edges:
            self._check_crossing(edge, owner)
        return regions

    def _body(self, node: Node, first: str) -> set[str]:
        """The nodes a container's body reaches from `first` before it comes back to the container."""
        body: set[str] = set()
        pending = [first]
        while pending:
            current = pending.pop()
            if current == node.id or current in body or self.nodes[current].type == "end":
                continue
            body.add(current)
            pending.extend(self.successors(current))
        return body

    def _check_body(self, node: Node, body: set[str], entry: str) -> None:
        """A body holds neither what follows its container (COMPLETE) nor the flow's start."""
        for after in (e.target for e in self.handled[node.id] if e.handle == COMPLETE):
            if after in body:
                self.fail(
                    f"{node.type} '{node.id}': its body (NEXT) reaches '{after}', which follows it "
                    f"(COMPLETE); the body's last node must lead back to '{node.id}'"
                )
        if entry in body:
            self.fail(
                f"node '{entry}': the start node is inside the body of {node.type} '{node.id}'"
            )

    def _check_nesting(self, bodies: dict[str, set[str]]) -> None:
        """Two bodies are apart or one lies wholly inside the other."""
        for c, body in bodies.items():
            for d, other in bodies.items():
                if c < d and body & other and not (other <= body or body <= other):
                    self.fail(
                        f"the bodies of '{c}' and '{d}' overlap; a body lies wholly inside another"
                    )

    def _check_crossing(self, edge: Edge, owner: dict[str, str | None]) -> None:
        """An edge stays in its region, but for a container's NEXT into its body and a body's way back."""
        if edge.handle == NEXT and self.nodes[edge.source].type in CONTAINERS:
            return
        if self.nodes[edge.target].type == "end" or self.nodes[edge.source].type == "end":
            return
        source_region, target_region = owner[edge.source], owner[edge.target]
        if edge.target == source_region:
            return  # back to the container: the end of one pass
        if source_region != target_region:
            inside = f"the body of '{source_region}'" if source_region else "the flow"
            there = f"the body of '{target_region}'" if target_region else "the flow's top level"
            self.fail(
                f"edge '{edge.id}': it leads from '{edge.source}' in {inside} to '{edge.target}' in "
                f"{there}; control stays inside a body (leave it by returning to its node)"
            )

    def target_of(self, edge: Edge, source: Node) -> str:
        target = self.nodes[edge.target]
        if target.type == "end" or edge.target == self.owner.get(source.id):
            return END
        return target.step
