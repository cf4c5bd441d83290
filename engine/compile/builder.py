"""Builds one LangGraph StateGraph from a list of steps: each construct adds its nodes, then the
region's plan (engine/compile/topology.py) wires them together.

A construct returns a `Built`: the node(s) its predecessors go to (`entries`) and how it leaves:
either a `tail` node whose static out-edges the builder adds, or — for steps that route
themselves with `Command(goto=...)` — the lists `after` (always go there when done) and
`default` (decide steps: where values without a branch go), filled in by the builder once every
step of the region exists. LangGraph runs both a node's static edges and its Command's goto, so
a node has one or the other, never both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy

from engine.compile.compiled import CompiledFlow
from engine.compile.delegates import split_delegated
from engine.compile.emits import Emits
from engine.compile.inline import Inline
from engine.compile.position import Pass, Where
from engine.compile.state import State
from engine.compile.topology import EXIT, Plan, plan_region
from engine.definitions.pinned import Bundle
from engine.nodes.context import RunContext
from engine.nodes.errors import internal
from engine.nodes.scope import Frame
from engine.spec import BlockSpec, StepSpec


@dataclass
class Built:
    entries: list[str]
    tail: str | None = None
    after: list[str] = field(default_factory=list)
    default: list[str] = field(default_factory=list)
    # For a plain step node: hands it a follower to run inline (see GraphBuilder.follower)
    fuse: Callable[[Follower], None] | None = None


@dataclass
class Region:
    """One list of steps being built into a graph: the flow's steps or a loop/foreach body."""

    plan: Plan
    frames: tuple[Frame, ...]
    exit: str  # END, or the node that a body's pass ends in
    describe: str  # "the flow", "the loop body of step 'x'"
    entries: dict[str, list[str]] = field(default_factory=dict)
    # steps only an agent of the list calls
    delegated: dict[str, StepSpec] = field(default_factory=dict)
    passes: tuple[Pass, ...] = ()  # enclosing loops (innermost last), for the events of the steps
    where: Where | None = None

    def resolve(self, target: str) -> list[str]:
        """Entry nodes of a step id, or the region's exit for `end`."""
        return [self.exit] if target == EXIT else self.entries[target]


# what every module of BUILDERS (engine/compile/constructs.py) has as `build`: it takes the model of its
# action (a LoopStep, engine/spec/flow.py), so the action's key is there by type; `construct` hands it a
# step of that action only (tests/test_registries.py checks each member's parameter)
Construct = Callable[["GraphBuilder", Region, Any], Built]


@dataclass(frozen=True)
class Compiler:
    """What the builder needs from the compiler above it, handed down by engine/compile/flow.py (the
    constructs build on this module, so it cannot import them): the construct that builds one step,
    and the compilation of a subflow's own graph (`flow:` steps, flows an agent delegates to)."""

    construct: Construct
    subflow: Callable[
        [Bundle, str, bool], CompiledFlow
    ]  # (bundle, step-id prefix, inline) -> its graph


# A self-routing node function (router, loop check) that can also run inline at the end of the
# step before it, on the state as that step's update leaves it.
Follower = Callable[[Any, Runtime[RunContext]], Awaitable[Any]]


class GraphBuilder:
    """Adds nodes and edges for a flow (or a map body) to one StateGraph."""

    def __init__(
        self,
        bundle: Bundle,
        prefix: str,
        compiler: Compiler,
        passes: tuple[Pass, ...] = (),
        emits: Emits | None = None,
        *,
        inline: bool = False,
    ) -> None:
        """`inline`: a graph for the engine's runs, whose steps may run one after another in one
        LangGraph step (engine/compile/inline.py)."""
        self.bundle = bundle
        self.compiler = compiler
        # the steps' `emit:`, shared with map bodies
        self.emits = emits if emits is not None else Emits()
        self.flow = bundle.name
        self.prefix = prefix
        self.graph: StateGraph[Any, RunContext, Any, Any] = StateGraph(
            State, context_schema=RunContext
        )
        self.nodes: set[str] = set()
        self.followers: dict[str, Follower] = {}
        self._building: list[Region] = []  # the regions whose steps are being added, innermost last
        self._passes = passes  # loops around this whole graph (a map body inside a loop)
        # `inline: false` or a step limit of the flow's own (counted per LangGraph step): step by step
        self.inline = (
            Inline() if inline and bundle.flow.inline and bundle.flow.max_steps is None else None
        )

    def label(self, step_id: str) -> str:
        """A step id as events and errors show it (prefixed inside subflows)."""
        return self.prefix + step_id

    def where(self, step_id: str) -> str:
        return f"flow '{self.flow}', step '{step_id}'"

    def block(self, ref: str, step_id: str) -> BlockSpec:
        block = self.bundle.blocks.get(ref)
        if block is None:
            raise internal(
                f"{self.where(step_id)}: block '{ref}', which is not in the flow's bundle", "BY210"
            )
        return block

    def add_node(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        retry: RetryPolicy | None = None,
        subgraph: bool = False,
        inline: bool = False,
    ) -> str:
        """Add a node. `subgraph=True` for nodes that invoke a compiled graph (subflows, map bodies):
        LangGraph then finds that graph in the function's closure (for state inspection and
        message streaming); other nodes are wrapped so that it does not have to look. `inline=True`
        for the nodes of steps that may run inside another step's node (engine/compile/inline.py),
        which then applies their retry policy itself."""
        if name in self.nodes:
            raise internal(f"flow '{self.flow}': two steps named '{name.split('.')[0]}'", "BY302")
        self.nodes.add(name)
        where = self._building[-1].where if self._building else None
        node: Callable[..., Any] = fn if subgraph else _Node(fn, where, self.emits)
        if self.inline is not None and inline and not subgraph:
            node, retry = self.inline.add(name, node, retry), None  # it retries its steps itself
        self.graph.add_node(name, node, retry_policy=retry, input_schema=State)
        return name

    def add_items(
        self,
        name: str,
        fn: Callable[..., Any],
        join: str,
        *,
        retry: RetryPolicy | None = None,
        subgraph: bool = False,
        inline: bool = True,
    ) -> str:
        """Add the node that runs one item of a map (each gets a `Send`), and its edge to `join`,
        which runs when every item has. In an inline graph the node before may run the items itself
        (engine/compile/inline.py), unless `inline` is False (an item may wait for a person)."""
        self.add_node(name, fn, retry=retry, subgraph=subgraph)
        self.graph.add_edge(name, join)
        if self.inline is not None and not subgraph and inline:
            where = self._building[-1].where if self._building else None
            self.inline.add_items(name, _Node(fn, where, self.emits), [join], retry)
        return name

    def follower(self, name: str, fn: Follower) -> str:
        """Add a self-routing node (router, loop start or check, foreach start or next, map fan-out)
        that a plain step leading only to it runs inline instead: one LangGraph step (and
        checkpoint) fewer per pass, with the same events, records and routing."""
        self.add_node(name, fn, inline=True)
        self.followers[name] = fn
        return name

    def sub_builder(self) -> GraphBuilder:
        """A builder for a separate graph of the same flow (a map body)."""
        return GraphBuilder(
            self.bundle,
            self.prefix,
            self.compiler,
            self._building[-1].passes if self._building else self._passes,
            self.emits,
            inline=self.inline is not None,
        )

    def build_root(
        self, steps: list[StepSpec], frames: tuple[Frame, ...] = (), describe: str = "the flow"
    ) -> list[str]:
        """Build `steps` as the whole graph: START -> entry, region ends -> END; its entry nodes."""
        entries = self.build_region(steps, frames, END, describe)
        for entry in entries:
            self.graph.add_edge(START, entry)
        return entries

    def build_region(
        self,
        steps: list[StepSpec],
        frames: tuple[Frame, ...],
        exit_node: str,
        describe: str,
        loop: Pass | None = None,
    ) -> list[str]:
        """Add the nodes of `steps` (the body of `loop`, if given) and wire them; returns the region's
        entry nodes."""
        steps, delegated = split_delegated(
            steps, self.bundle.blocks, f"flow '{self.flow}', {describe}"
        )
        region = Region(
            plan_region(steps, self.bundle.blocks, f"flow '{self.flow}'", describe),
            frames,
            exit_node,
            describe,
            delegated=delegated,
        )
        if self.inline is not None and region.plan.parallel():
            self.inline.parallel = (
                True  # two of its nodes may run in one LangGraph step: none runs inline
            )
        region.passes = self._building[-1].passes if self._building else self._passes
        if loop is not None:
            region.passes = (*region.passes, loop)
        if frames or region.passes:
            labels = frozenset(self.label(s.id) for s in [*steps, *delegated.values()])
            region.where = Where(frames, region.passes, labels)
        built: dict[str, Built] = {}
        for step in [*steps, *delegated.values()]:
            self.emits.add(self.label(step.id), step, frames)
        self._building.append(region)
        try:
            for step in steps:
                built[step.id] = self.compiler.construct(self, region, step)
                region.entries[step.id] = built[step.id].entries
        finally:
            self._building.pop()
        self._wire(region, built)
        return region.entries[region.plan.entry]

    def _wire(self, region: Region, built: dict[str, Built]) -> None:
        plan = region.plan
        # parallel branches of a body end its pass once, when all of them have finished
        joined_ends = (
            plan.implicit_ends if region.exit != END and len(plan.implicit_ends) > 1 else []
        )
        in_barriers = {name for needs, _ in plan.barriers for name in needs}
        for step in plan.steps:
            piece = built[step.id]
            following = plan.following[step.id]
            if step.id in joined_ends:
                following = [target for target in following if target != EXIT]
            if piece.tail is None and (step.router is not None or step.branches is not None):
                piece.after.extend(self._targets(region, plan.dependents[step.id]))
                piece.default.extend(self._targets(region, following))
                continue
            targets = self._targets(region, [*following, *plan.dependents[step.id]])
            if piece.tail is None:
                piece.after.extend(targets)
            elif (
                len(targets) == 1
                and targets[0] in self.followers
                and piece.fuse is not None
                and step.id not in in_barriers
            ):
                piece.fuse(self.followers[targets[0]])
            elif self.inline is not None and self.inline.routes(piece.tail):
                # its node goes there itself (engine/compile/inline.py)
                self.inline.then(piece.tail, targets)
            else:
                for target in targets:
                    self.graph.add_edge(piece.tail, target)
        for needs, waiting in plan.barriers:
            sources = [self._static_tail(built[name], name) for name in needs]
            for entry in region.entries[waiting]:
                self.graph.add_edge(sources, entry)
        if joined_ends:
            self.graph.add_edge(
                [self._static_tail(built[name], name) for name in joined_ends], region.exit
            )

    def _static_tail(self, piece: Built, name: str) -> str:
        """A node with static out-edges that stands for the end of the step (barrier joins need one):
        the step's tail, or for a self-routing step a pass-through node it also goes to."""
        if piece.tail is not None:
            return piece.tail
        done = f"{name}.done"
        if done not in self.nodes:
            self.add_node(done, _pass)
            piece.after.append(done)
        return done

    def _targets(self, region: Region, targets: list[str]) -> list[str]:
        nodes: list[str] = []
        for target in targets:
            nodes.extend(region.resolve(target))
        return list(dict.fromkeys(nodes))


class _Node:
    """A node function behind a plain object. For a function, LangGraph's add_node disassembles the
    closure looking for subgraphs and evaluates its string annotations — most of the compile
    time of a long flow; for this object it does neither (the input schema is given explicitly)."""

    __slots__ = ("emits", "fn", "where")

    def __init__(
        self, fn: Callable[..., Any], where: Where | None = None, emits: Emits | None = None
    ) -> None:
        self.fn = fn
        self.where = (
            where  # inside a loop body or an item: events say which pass, of how many items
        )
        self.emits = emits  # steps' custom events, raised after their step_finished (filled in while building)

    async def __call__(self, state: Any, runtime: Runtime[RunContext]) -> Any:
        if self.where is not None:
            runtime = self.where.runtime(state, runtime)
        if self.emits is not None and self.emits.plans:
            runtime = self.emits.runtime(state, runtime)
        return await self.fn(state, runtime)


# resolved once here instead of at every add_node
_Node.__call__.__annotations__ = get_type_hints(_Node.__call__)


async def _pass(state: State, runtime: Runtime[RunContext]) -> None:
    """Marks the end of a self-routing step for a barrier join."""
    return None
