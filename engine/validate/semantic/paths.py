"""Graph checks of each region: unreachable steps, dead ends, and cycles without a bound."""

from __future__ import annotations

from engine.spec import END
from engine.validate.semantic.control import ControlGraph, Edge
from engine.validate.semantic.graph import (
    is_cycle,
    reachable,
    reverse,
    shortest_path,
    strongly_connected,
)
from engine.validate.semantic.index import FlowIndex, Region

ARROW = " -> "


def check_paths(index: FlowIndex, graphs: dict[Region, ControlGraph]) -> None:
    """BY305 unreachable, BY306 dead ends, BY307 unbounded cycles, region by region."""
    for region in index.regions:
        graph = graphs[region]
        if graph.entry is None:
            continue
        successors = graph.successors()
        live = reachable([graph.entry], successors)
        _unreachable(index, region, graph, successors, live)
        _dead_ends(index, region, successors, live)
        _unbounded(index, region, graph, successors, live)


def _unreachable(
    index: FlowIndex,
    region: Region,
    graph: ControlGraph,
    successors: dict[str, list[str]],
    live: set[str],
) -> None:
    lost = [node.id for node in region.steps if node.id not in live]
    if not lost:
        return
    lost_set = set(lost)
    feeders: dict[str, set[str]] = {}
    for source in lost:
        for target in successors[source]:
            feeders.setdefault(target, set()).add(source)
    # report where each lost part starts, not every step after it
    inner = {n: [t for t in successors[n] if t in lost_set] for n in lost}
    for component in strongly_connected(lost, inner):
        members = set(component)
        if any(feeders.get(member, set()) - members for member in component):
            continue
        node = region.by_id[component[0]]
        before = region.steps[node.index - 1] if node.index > 0 else None
        why = ""
        if before is not None and not any(
            e.target == node.id for e in graph.out.get(before.id, [])
        ):
            why = f"; the step before it, '{before.id}', does not continue to it"
        entry = graph.entry
        index.report(
            node.at("id"),
            "BY305",
            f"step '{node.id}' is unreachable: no path from the entry step '{entry}' of "
            f"{region.describe()} leads to it{why} (name it in a goto, branch or route, or remove it)",
        )


def _dead_ends(
    index: FlowIndex, region: Region, successors: dict[str, list[str]], live: set[str]
) -> None:
    finishing = reachable([END], reverse(successors))
    stuck = [node.id for node in region.steps if node.id in live and node.id not in finishing]
    if not stuck:
        return
    stuck_set = set(stuck)
    inner = {n: [t for t in successors[n] if t in stuck_set] for n in stuck}
    for component in strongly_connected(stuck, inner):
        leaves_component = any(t not in component for member in component for t in inner[member])
        if leaves_component:
            continue  # it only leads into a trap reported on its own
        node = region.by_id[component[0]]
        finish = (
            "the end of the flow" if region.owner is None else f"the end of {region.describe()}"
        )
        if len(component) == 1 and node.id not in successors[node.id]:
            # no cycle: a step that names no step after it (a decide step with `branches: {}`)
            index.report(
                node.at("id"),
                "BY306",
                f"step '{node.id}' leads to no other step: no path from '{node.id}' reaches "
                f"{finish} (give it a goto, or a branch for each value it can choose)",
            )
            continue
        if len(component) == 1:
            what = f"step '{node.id}' repeats itself"
        else:
            what = f"steps {', '.join(repr(m) for m in component)} go round in a cycle"
        index.report(
            node.at("id"),
            "BY306",
            f"{what} with no way out: no path from '{node.id}' reaches {finish} (give the cycle "
            "an exit, e.g. a router default or on_max_visits: end)",
        )


def _unbounded(
    index: FlowIndex,
    region: Region,
    graph: ControlGraph,
    successors: dict[str, list[str]],
    live: set[str],
) -> None:
    if graph.forward:
        return
    bounded = {node.id for node in region.steps if node.spec.max_visits is not None}
    free = [node.id for node in region.steps if node.id not in bounded and node.id in live]
    free_set = set(free)
    inner = {n: [t for t in successors[n] if t in free_set] for n in free}
    position = {node.id: node.index for node in region.steps}
    for component in strongly_connected(free, inner):
        if not is_cycle(component, inner):
            continue
        members = set(component)
        back = _back_edge(graph, members, position)
        if back.source == back.target:
            cycle = [back.source]
        else:
            cycle = shortest_path(back.target, back.source, inner, members.__contains__) or [
                back.target,
                back.source,
            ]
        shown = ARROW.join([*cycle, back.target])
        index.report(
            back.path,
            "BY307",
            f"step '{back.source}' goes back to '{back.target}' ({shown}) and no step on this cycle has "
            f"max_visits, so it could run forever: add max_visits: N (and on_max_visits) to "
            f"'{back.target}', or use a loop: with max_iterations",
        )


def _back_edge(graph: ControlGraph, members: set[str], position: dict[str, int]) -> Edge:
    """The edge that closes the cycle: into its earliest step, from its latest one."""
    edges = [e for e in graph.edges if e.source in members and e.target in members]
    return min(edges, key=lambda e: (position[e.target], -position[e.source]))
