"""Dataflow findings: unbound block inputs, parallel writers of one key, flow outputs never written."""

from __future__ import annotations

from engine.core.diagnostics import did_you_mean
from engine.spec import END
from engine.validate.semantic.control import ControlGraph, Edge
from engine.validate.semantic.dataflow import Dataflow, key_fact, keys_of
from engine.validate.semantic.graph import bits, reach_masks
from engine.validate.semantic.index import FlowIndex, Region, StepNode


def check_inputs(index: FlowIndex, flow: Dataflow) -> None:
    """BY405: every input of every block a step runs has a source on every path to the step."""
    flow_inputs = index.definition.spec.inputs
    for node in index.walk():
        spec = node.spec
        if node.block is None:
            continue
        if node.action == "uses":
            bound, items, where = spec.with_, node.region.items, node.at("uses")
        elif node.action == "map" and spec.map is not None and spec.map.uses is not None:
            bound, items, where = (
                spec.map.with_,
                (*node.region.items, spec.map.as_),
                node.at("map", "uses"),
            )
        else:
            continue
        must, may = flow.before(node)
        if must is None:
            continue  # unreachable: reported on its own
        block = node.block.spec
        for name, decl in block.inputs.items():
            if (
                name in bound
                or key_fact(name) in must
                or name in flow_inputs
                or decl.has_default
                or name in items
            ):
                continue
            head = f"step '{node.id}': input '{name}' of block '{block.block}' is not bound"
            bind = "map.with" if node.action == "map" else "with"
            explained = flow.explain(name, may, f"'{node.id}'")
            if explained is not None:
                why = f"; {explained}"
            else:
                hint = did_you_mean(name, keys_of(must))
                why = (
                    f": no `{bind}:` binding, no earlier step writes context key '{name}', the flow has no input "
                    f"'{name}' and the block gives no default{hint}"
                )
            index.report(where, "BY405", f"{head}{why} (bind it with `{bind}: {{{name}: ...}}`)")


def check_parallel_writes(
    index: FlowIndex, flow: Dataflow, graphs: dict[Region, ControlGraph]
) -> None:
    """BY406: steps that may run at the same time must not write the same context key.

    At each fan-out, a step reached from exactly one of the arms runs in that arm only; two such
    steps of different arms may run in parallel. Reachability is computed once per region as
    bitsets, so dense `needs:` (every step fanning out to many) stay linear in the edges.
    """
    reported: set[tuple[str, frozenset[str]]] = set()
    order = {node: position for position, node in enumerate(index.nodes)}
    for region in index.regions:
        graph = graphs[region]
        successors = graph.successors()
        names = list(successors)  # the region's steps in list order, then END
        masks = reach_masks(names, successors)
        writes = {name: sorted(flow.may_write(region.by_id[name])) for name in names if name != END}
        writing = sum(1 << position for position, name in enumerate(names) if writes.get(name))
        for _, arms in graph.fan_outs():
            reach = [masks[arm] & writing for arm in arms]
            once = twice = 0
            for mask in reach:
                twice |= once & mask
                once |= mask
            alone = once & ~twice  # reached from one arm only
            writers: dict[str, list[tuple[int, StepNode]]] = {}
            for position, mask in enumerate(reach):
                for bit in bits(mask & alone):  # list order
                    node = region.by_id[names[bit]]
                    for key in writes[node.id]:
                        writers.setdefault(key, []).append((position, node))
            for key, found in writers.items():
                _report_pairs(index, key, found, reported, order)


def _report_pairs(
    index: FlowIndex,
    key: str,
    found: list[tuple[int, StepNode]],
    reported: set[tuple[str, frozenset[str]]],
    order: dict[StepNode, int],
) -> None:
    for i, (arm, first) in enumerate(found):
        for other_arm, second in found[i + 1 :]:
            pair = frozenset({first.id, second.id})
            if other_arm == arm or (key, pair) in reported:
                continue
            reported.add((key, pair))
            early, late = sorted((first, second), key=order.__getitem__)
            index.report(
                late.at("id"),
                "BY406",
                f"steps '{early.id}' and '{late.id}' may run in parallel and both write context key "
                f"'{key}'; rename one with `outputs:`, or order them with `needs:`",
            )


def check_flow_outputs(
    index: FlowIndex, flow: Dataflow, graphs: dict[Region, ControlGraph]
) -> None:
    """BY408/BY409: each key in the flow's `outputs` is written before the run ends. An optional
    output (or one with a default) may be missing at the end; a required one that some path to the
    end never writes is reported with that path."""
    must, may = flow.at_end()
    if must is None:
        return  # the flow cannot end normally: the dead end is reported
    written = keys_of(may)
    spec = index.definition.spec
    for position, key in enumerate(spec.outputs):
        where = ("outputs", key) if isinstance(spec.outputs, dict) else ("outputs", position)
        if key_fact(key) in must:
            continue
        if key_fact(key) in may:
            if not spec.output(key).required:
                continue
            path = unwritten_path(key, index.root, graphs[index.root], flow)
            writer = flow.writers.get(key)
            verb = (
                "may write"
                if writer is not None and key in flow.optional_writes(writer)
                else "writes"
            )
            by = f" (step '{writer.id}' {verb} it)" if writer is not None else ""
            on = f"on the path {path}" if path is not None else "on every path to the end"
            index.report(
                where,
                "BY409",
                f"flow output '{key}' is not written {on}{by}; runs that end that way fail (declare "
                "it `{optional: true}` or give it a `default:` if that is expected)",
                key=isinstance(spec.outputs, dict),
            )
            continue
        explained = flow.explain(key, may, "the end")
        why = (
            explained
            if explained is not None
            else f"no step writes context key '{key}'{did_you_mean(key, written)}"
        )
        index.report(
            where,
            "BY408",
            f"flow output '{key}' is never written: {why}",
            key=isinstance(spec.outputs, dict),
        )


def unwritten_path(key: str, region: Region, graph: ControlGraph, flow: Dataflow) -> str | None:
    """A path from the region's entry to its end along which no step surely writes `key`, as
    "classify → end (branch 'other')"; None when none is found (the key is then missing through a
    body, or a parallel join the search does not model)."""
    if graph.entry is None:
        return None
    fact = key_fact(key)
    came: dict[str, tuple[str, Edge] | None] = {graph.entry: None}
    queue = [graph.entry]
    while queue:
        name = queue.pop(0)
        node = region.by_id[name]
        writes = fact in flow.gen(node)
        for edge in graph.out.get(name, []):
            if edge.ran and writes:
                continue
            if edge.target == END:
                return _describe([*_back(came, name), (name, edge)])
            if edge.target not in came:
                came[edge.target] = (name, edge)
                queue.append(edge.target)
    return None


def _back(came: dict[str, tuple[str, Edge] | None], name: str) -> list[tuple[str, Edge]]:
    steps: list[tuple[str, Edge]] = []
    previous = came[name]
    while previous is not None:
        steps.append(previous)
        previous = came[previous[0]]
    return list(reversed(steps))


def _describe(hops: list[tuple[str, Edge]]) -> str:
    parts: list[str] = []
    for source, edge in hops:
        why = _choice(edge)
        parts.append(f"{source}{f' ({why})' if why else ''}")
    return " → ".join([*parts, "end"])


def _choice(edge: Edge) -> str | None:
    """The choice an edge stands for, when the step had others: a branch, a route, an exit."""
    if edge.kind == "branch":
        return f"branch '{edge.path[-1]}'"
    if edge.kind == "route":
        return "default route" if edge.path[-1] == "default" else f"route {int(edge.path[-2]) + 1}"
    return {"reject": "rejected", "timeout": "timed out", "max_visits": "max_visits reached"}.get(
        edge.kind
    )
