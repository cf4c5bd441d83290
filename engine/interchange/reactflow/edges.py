"""Sorting the edges: what each edge means to its source (then, a delegation to a sub-agent, or a
handle the source understands: NEXT/COMPLETE, a route, a branch, an exit), and routers' routes."""

from __future__ import annotations

import json

from engine.interchange.reactflow.model import (
    BRANCH,
    COMPLETE,
    CONTAINERS,
    EXITS,
    NEXT,
    Edge,
    GraphReader,
    Node,
    as_list,
)
from engine.spec.flow import ROUTE_CONDITIONS


class EdgeClassifier(GraphReader):
    """What each edge means to its source, and whether a router's routes are well formed."""

    def classify(self) -> None:
        """Sort every edge into: plain ("then"), delegate, or a handle its source understands."""
        self.plain: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        self.handled: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        self.delegations: dict[str, list[str]] = {n: [] for n in self.nodes}
        self.incoming: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        for edge in self.edges:
            self.incoming[edge.target].append(edge)
            self._classify_edge(edge)
        self._tool_delegations()
        for node in self.nodes.values():
            if node.type in CONTAINERS:
                self._check_body_start(node)
            if node.type == "router":
                self.check_router(node)

    def _classify_edge(self, edge: Edge) -> None:
        """File one edge under its source: a delegation, a plain edge, or a handle (or report it)."""
        source, target = self.nodes[edge.source], self.nodes[edge.target]
        if source.type == "end":
            self.fail(f"edge '{edge.id}': it leaves the end node '{source.id}'")
        elif (
            source.type == "agent"
            and target.type == "agent"
            and edge.kind != "next"
            and edge.handle in (None, "delegate")
        ):
            self.delegations[source.id].append(target.id)
        elif edge.handle in (None, "next") and source.type not in CONTAINERS:
            self.plain[source.id].append(edge)
        elif source.type in CONTAINERS:
            self._classify_container_edge(edge, source)
        elif source.type == "router":
            self._classify_router_edge(edge, source)
        elif (edge.handle or "") in EXITS or (edge.handle or "").startswith(BRANCH):
            self.handled[source.id].append(edge)
        else:
            self.fail(
                f"edge '{edge.id}': node '{source.id}' ({source.type}) has no handle '{edge.handle or ''}'"
            )

    def _classify_container_edge(self, edge: Edge, source: Node) -> None:
        """A loop, foreach or map is left by NEXT (into its body), COMPLETE (after it) or an exit."""
        handle = edge.handle or ""
        if handle.upper() in (NEXT, COMPLETE):
            edge.handle = handle.upper()
            self.handled[source.id].append(edge)
        elif source.type == "map" and edge.handle is None:
            self.plain[source.id].append(edge)
        elif handle in EXITS:
            self.handled[source.id].append(edge)
        else:
            shown = f"handle '{handle}'" if handle else "no handle"
            self.fail(
                f"edge '{edge.id}': it leaves {source.type} '{source.id}' by {shown}; "
                f"an {source.type} is left by NEXT (its body) or COMPLETE (after it)"
            )

    def _classify_router_edge(self, edge: Edge, source: Node) -> None:
        """A router is left by the handle of one of its routes, its default's, or an exit."""
        handle = edge.handle or ""
        if handle in self.router_handles(source) or handle in EXITS:
            self.handled[source.id].append(edge)
        else:
            known = ", ".join(self.router_handles(source)) or "none"
            self.fail(
                f"edge '{edge.id}': router '{source.id}' has no handle '{handle}' "
                f"(no route names it; its handles: {known})"
            )

    def _tool_delegations(self) -> None:
        """An agent that names another agent (by id or label) among its tools delegates to it, edge or not."""
        agents = {n.id: n for n in self.nodes.values() if n.type == "agent"}
        agents.update({n.label: n for n in list(agents.values())})
        for node in agents.values():
            tools = node.data.get("tools") if node.data.get("block") is None else None
            for name in tools if isinstance(tools, list) else []:
                if (
                    isinstance(name, str)
                    and name in agents
                    and agents[name].id not in self.delegations[node.id]
                ):
                    self.delegations[node.id].append(agents[name].id)

    def _check_body_start(self, node: Node) -> None:
        """A container's body starts at one node, by one NEXT edge (a map may have none: it maps a block)."""
        nexts = [e for e in self.handled[node.id] if e.handle == NEXT]
        if len(nexts) > 1:
            self.fail(
                f"{node.type} '{node.id}': {len(nexts)} NEXT edges; its body starts at one node"
            )
        elif not nexts and node.type != "map":
            self.fail(f"{node.type} '{node.id}': no NEXT edge to the first node of its body")

    def router_handles(self, node: Node) -> list[str]:
        routes = as_list(node.data.get("routes"))
        handles = [
            str(r.get("target_handle"))
            for r in routes
            if isinstance(r, dict) and r.get("target_handle")
        ]
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
            if condition not in ROUTE_CONDITIONS:
                self.fail(
                    f"router '{node.id}': routes[{number}] has condition {json.dumps(condition)} "
                    f"(known: {', '.join(ROUTE_CONDITIONS)})"
                )
            if not isinstance(route.get("value"), str):
                self.fail(f"router '{node.id}': routes[{number}] needs a text `value`")
            if not route.get("target_handle"):
                self.fail(f"router '{node.id}': routes[{number}] needs a `target_handle`")
