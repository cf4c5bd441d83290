"""What is known at each step: which context keys are written and which steps have run.

Two analyses per region, over its control graph:
- forward ("before this step, on every path" and "on some path"): sets of facts at each step's
  start. Paths meet at a step by intersection, except the steps a `needs` join waits for, which
  have all finished and are united. Exits that skip a step (on_reject, on_max_visits, on_timeout)
  carry the facts from before it.
- backward ("from this step until the region ends, for sure"): a step's own facts plus those of
  its successors: united over parallel successors, intersected over alternatives (router routes,
  branches, skip exits). This gives what a loop body guarantees and what the flow returns.
Facts are strings: "c:<key>" a context key is written, "s:<id>" step <id> has finished. None
means "not computed yet" (the top of the lattice: every fact).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.spec import END, ApprovalSpec, FlowSpec
from engine.spec.walk import accumulated
from engine.validate.semantic.control import CONCURRENT, ControlGraph, Edge, continues_in_order
from engine.validate.semantic.facts import NOTHING, Facts, FactTable
from engine.validate.semantic.index import FlowIndex, Region, StepNode

ROUTING = frozenset({"route", "branch", "goto"})


def meet(a: Facts | None, b: Facts | None) -> Facts | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def join(a: Facts | None, b: Facts | None) -> Facts | None:
    if a is None or b is None:
        return None
    return a | b


def key_fact(key: str) -> str:
    return "c:" + key


def step_fact(step: str) -> str:
    return "s:" + step


def keys_of(facts: Iterable[str]) -> list[str]:
    return sorted(fact[2:] for fact in facts if fact.startswith("c:"))


@dataclass
class RegionFacts:
    graph: ControlGraph
    # at each step's start, on every path
    must: dict[str, Facts | None] = field(default_factory=dict)
    may: dict[str, Facts] = field(default_factory=dict)  # at each step's start, on some path
    # from each step to the region's end
    finish: dict[str, Facts | None] = field(default_factory=dict)
    end: Facts | None = None  # forward: certain on every arrival at the region's end


class Dataflow:
    """The analyses of one flow; needs a flow whose references resolve (index.broken is False)."""

    def __init__(self, index: FlowIndex, graphs: dict[Region, ControlGraph]) -> None:
        self.index = index
        self.graphs = graphs
        self.regions: dict[Region, RegionFacts] = {}
        self.writers: dict[str, StepNode] = {}  # first step writing each key to the shared context
        self.private: dict[str, StepNode] = {}  # ... or, failing that, inside a map item
        for node in index.walk():
            table = self.private if map_owner(node) is not None else self.writers
            for key in [*self.writes(node), *self.optional_writes(node)]:
                table.setdefault(key, node)
            if node.action == "map" and node.block is not None:
                for key in node.block.spec.outputs:  # what each item's block returns
                    self.private.setdefault(key, node)
        self.by_id = {node.id: node for node in index.nodes}
        self.table = FactTable()
        self._gens: dict[StepNode, Facts] = {}
        self._gens_may: dict[StepNode, Facts] = {}
        for region in index.regions:
            self.regions[region] = RegionFacts(graphs[region])
        for region in reversed(index.regions):  # bodies before the steps that own them
            self._finish(region)
        # keys that steps accumulate (`reduce:`) exist, empty, from the start of a run
        start = self.table.of(map(key_fact, accumulated(index.definition.spec.steps)))
        self.start = start
        self._forward(index.root, start, start)

    # what a step writes -------------------------------------------------------------------
    def writes(self, node: StepNode) -> list[str]:
        """Context keys the step itself writes (after renames); map items keep theirs private, and a
        delegated step answers the agent that calls it instead."""
        if node.region.kind == "delegate":
            return []
        spec = node.spec
        produced: list[str] = []
        if node.action == "uses" and node.block is not None:
            produced.extend(node.block.spec.outputs)
        elif node.action == "flow" and node.subflow is not None:
            sub = node.subflow.spec
            produced.extend(name for name in sub.outputs if not _maybe_missing(sub, name))
        keys = [spec.output_key(name) for name in produced]
        if node.action == "approval" and spec.approval is not None:
            keys.extend(spec.approval.fields)
        if isinstance(spec.require_approval, ApprovalSpec):
            keys.extend(spec.require_approval.fields)
        body = spec.map if spec.map is not None else spec.foreach
        if body is not None and body.collect:
            keys.append(body.collect)
        return list(dict.fromkeys(keys))

    def optional_writes(self, node: StepNode) -> list[str]:
        """Keys a `flow:` step writes only when the subflow returns them: its optional outputs
        without a default."""
        if node.region.kind == "delegate" or node.action != "flow" or node.subflow is None:
            return []
        sub = node.subflow.spec
        return [node.spec.output_key(name) for name in sub.outputs if _maybe_missing(sub, name)]

    def may_write(self, node: StepNode) -> set[str]:
        """Keys the step may write, its loop or foreach body included (the parallel-writes check)."""
        keys = set(self.writes(node)) | set(self.optional_writes(node))
        if node.body is not None and node.body.kind != "map":
            for inner in node.body.steps:
                keys |= self.may_write(inner)
        return keys

    def gen(self, node: StepNode) -> Facts:
        """Facts a step adds for sure when it runs."""
        cached = self._gens.get(node)
        if cached is None:
            facts = self.table.of([step_fact(node.id), *map(key_fact, self.writes(node))])
            if node.body is not None and node.body.kind == "loop":
                facts |= self.body_finish(node.body) or NOTHING  # the body runs at least once
            cached = self._gens[node] = facts
        return cached

    def gen_may(self, node: StepNode) -> Facts:
        """Facts a step may add when it runs (everything its loop or foreach body may write)."""
        cached = self._gens_may.get(node)
        if cached is None:
            facts = self.gen(node) | self.table.of(map(key_fact, self.optional_writes(node)))
            if node.body is not None and node.body.kind != "map":
                for inner in node.body.steps:
                    facts |= self.gen_may(inner)
            cached = self._gens_may[node] = facts
        return cached

    # backward: what is certain from a step to the end of its region ---------------------
    def body_finish(self, region: Region) -> Facts | None:
        graph = self.graphs[region]
        if graph.entry is None:
            return NOTHING
        return self.regions[region].finish.get(graph.entry)

    def _finish(self, region: Region) -> None:
        facts = self.regions[region]
        graph = facts.graph
        finish = facts.finish
        gens = {node.id: self.gen(node) for node in region.steps}
        for node in region.steps:
            finish[node.id] = None
        finish[END] = NOTHING
        changed = True
        while changed:
            changed = False
            for node in reversed(region.steps):
                value = self._finish_step(node, graph, finish, gens[node.id])
                if value != finish[node.id]:
                    finish[node.id] = value
                    changed = not graph.forward

    def _finish_step(
        self, node: StepNode, graph: ControlGraph, finish: dict[str, Facts | None], gen: Facts
    ) -> Facts | None:
        edges = graph.out.get(node.id, [])
        together: Facts | None = NOTHING
        for edge in edges:
            if edge.kind in CONCURRENT:
                together = join(together, finish[edge.target])
        choices = [finish[e.target] for e in edges if e.kind in ROUTING]
        if choices:
            after: Facts | None = None
            for choice in choices:
                after = meet(after, choice)
            if continues_in_order(node) and node.spec.branches is not None:
                after = meet(after, together)  # a decide value without a branch continues in order
            else:
                after = join(after, together)
        else:
            after = together
        result = join(gen, after)
        for edge in edges:
            if not edge.ran:
                result = meet(result, finish[edge.target])
        return result

    # forward: what is certain (and possible) when a step starts ---------------------------
    def _forward(self, region: Region, entry_must: Facts | None, entry_may: Facts) -> None:
        facts = self.regions[region]
        graph = facts.graph
        must, may = facts.must, facts.may
        again: dict[str, Facts | None] = {}  # facts on arrivals other than the region's entry
        for node in region.steps:
            must[node.id] = again[node.id] = None
            may[node.id] = NOTHING
        changed = True
        while changed:
            changed = False
            for node in region.steps:
                found = self._start(node, graph, entry_must, entry_may, must, may, again)
                if found != (must[node.id], may[node.id], again[node.id]):
                    must[node.id], may[node.id], again[node.id] = found
                    changed = not graph.forward
        for edge in graph.into.get(END, []):
            facts.end = meet(facts.end, self._after(edge, must, may, again)[0])
        for node in region.steps:
            if node.body is not None:
                self._forward(node.body, must[node.id], may[node.id])

    def _after(
        self,
        edge: Edge,
        must: dict[str, Facts | None],
        may: dict[str, Facts],
        again: dict[str, Facts | None],
    ) -> tuple[Facts | None, Facts]:
        """Facts carried along one edge."""
        node = self.by_id[edge.source]
        if edge.kind == "max_visits":
            # the bound is hit on a later arrival, after the step has run at least once
            return join(again[edge.source], self.gen(node)), may[edge.source] | self.gen_may(node)
        if not edge.ran:
            return must[edge.source], may[edge.source]
        return join(must[edge.source], self.gen(node)), may[edge.source] | self.gen_may(node)

    def _start(
        self,
        node: StepNode,
        graph: ControlGraph,
        entry_must: Facts | None,
        entry_may: Facts,
        must: dict[str, Facts | None],
        may: dict[str, Facts],
        again: dict[str, Facts | None],
    ) -> tuple[Facts | None, Facts, Facts | None]:
        """(certain, possible, certain on a later arrival) facts when `node` starts."""
        arrivals: Facts | None = None
        result_may: Facts = entry_may if node.id == graph.entry else NOTHING
        joined_must: Facts | None = NOTHING
        has_join = False
        for edge in graph.into.get(node.id, []):
            edge_must, edge_may = self._after(edge, must, may, again)
            result_may = result_may | edge_may
            if edge.kind == "needs":
                has_join = True  # a join waits for all it needs: their facts add up
                joined_must = join(joined_must, edge_must)
            else:
                arrivals = meet(arrivals, edge_must)
        if has_join:
            arrivals = meet(arrivals, joined_must)
        result_must = meet(entry_must, arrivals) if node.id == graph.entry else arrivals
        return result_must, result_may, arrivals

    # queries --------------------------------------------------------------------------------
    def explain(self, key: str, may: Facts, here: str) -> str | None:
        """Why context key `key` is not certain at `here`, when some step writes it; None if none does."""
        writer = self.writers.get(key)
        if writer is not None and key_fact(key) in may:
            return f"context key '{key}' is written by step '{writer.id}', but not on every path to {here}"
        if writer is not None:
            return (
                f"context key '{key}' is written by step '{writer.id}', which is not certain to finish "
                f"before {here} starts"
            )
        inner = self.private.get(key)
        if inner is None:
            return None
        owner = map_owner(inner)
        where = (
            f"by step '{inner.id}' inside the map of step '{owner.id}'"
            if owner is not None
            else f"by each item of the map of step '{inner.id}'"
        )
        return (
            f"context key '{key}' is only written {where}, and map items keep their outputs to themselves "
            "(gather them with the map's `collect:`)"
        )

    def before(self, node: StepNode) -> tuple[Facts | None, Facts]:
        """(certain, possible) facts when `node` starts."""
        facts = self.regions[node.region]
        return facts.must.get(node.id), facts.may.get(node.id, NOTHING)

    def at_body_end(self, node: StepNode) -> tuple[Facts | None, Facts]:
        """Facts after one pass through a loop body (where `until` is evaluated)."""
        start_must, start_may = self.before(node)
        assert node.body is not None
        done = self.body_finish(node.body)
        must = join(start_must, done) if done is not None else start_must
        return _either(must, self.regions[node.body].end), start_may | self.gen_may(node)

    def at_end(self) -> tuple[Facts | None, Facts]:
        """(certain, possible) facts when the flow finishes normally; certain is None if it never can."""
        done = self.body_finish(self.index.root)
        may = NOTHING
        for node in self.index.root.steps:
            may |= self.gen_may(node)
        if done is None:
            return None, may | self.start
        certain = _either(done, self.regions[self.index.root].end)
        assert certain is not None  # `done` is not None
        return certain | self.start, may | self.start


def _maybe_missing(flow: FlowSpec, name: str) -> bool:
    """Whether a run of `flow` may end without output `name` (optional, and no default)."""
    declared = flow.output(name)
    return declared.optional and not declared.has_default


def map_owner(node: StepNode) -> StepNode | None:
    """The map step whose body `node` sits in (at any depth), or None."""
    region: Region | None = node.region
    while region is not None and region.owner is not None:
        if region.kind == "map":
            return region.owner
        region = region.owner.region
    return None


def _either(a: Facts | None, b: Facts | None) -> Facts | None:
    """Facts that one of two sound analyses proves: each under-approximates, so their union does too."""
    if a is None or b is None:
        return a if b is None else b
    return a | b
