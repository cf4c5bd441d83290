"""A flow prepared for checking: its steps grouped in regions, with blocks and subflows resolved.

A region is one list of steps: the flow's top-level `steps`, or the body of a loop, foreach or
map. Control flow stays inside a region (a body's `end` ends one pass through the body), so the
graph checks and the dataflow run region by region.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.core.diagnostics import Diagnostic
from engine.definitions.load import Document, JsonPath
from engine.definitions.project import BlockDef, FlowDef, Project
from engine.spec import BlockSpec, FlowSpec, StepSpec
from engine.spec.delegation import Catalog
from engine.spec.walk import StepList, delegated_ids, walk_steps
from engine.validate.codes import WARNINGS


def issue(
    doc: Document, path: JsonPath, code: str, message: str, *, key: bool = False
) -> Diagnostic:
    """A diagnostic at `path` of `doc`, with the severity the code registry gives `code`."""
    severity = "warning" if code in WARNINGS else "error"
    return doc.diag(path, code, message, key=key, severity=severity)


def quote_list(names: Any) -> str:
    return ", ".join(f"'{name}'" for name in names)


@dataclass(eq=False)
class StepNode:
    """One step of the flow, where it sits, and what it resolved to."""

    spec: StepSpec
    path: JsonPath
    region: Region
    index: int
    block: BlockDef | None = None  # the block of `uses`, or of `map.uses`
    subflow: FlowDef | None = None
    body: Region | None = None
    id: str = field(init=False)
    action: str | None = field(init=False)  # copied once: the checks ask thousands of times

    def __post_init__(self) -> None:
        self.id = self.spec.id
        self.action = self.spec.action

    @property
    def block_spec(self) -> BlockSpec | None:
        return self.block.spec if self.block is not None else None

    @property
    def runs_block(self) -> BlockSpec | None:
        """The block this step itself runs (a `uses` step), not a map's per-item block."""
        return self.block_spec if self.spec.uses is not None else None

    @property
    def is_decide(self) -> bool:
        block = self.runs_block
        return block is not None and block.kind == "decide"

    def at(self, *parts: str | int) -> JsonPath:
        return (*self.path, *parts)


@dataclass(eq=False)
class Region:
    """A list of steps that control flow moves through: the flow's steps or a body."""

    kind: str  # flow | loop | foreach | map
    owner: StepNode | None
    path: JsonPath
    items: tuple[str, ...]  # `as` names visible here, innermost last
    steps: list[StepNode] = field(default_factory=list)
    by_id: dict[str, StepNode] = field(default_factory=dict)

    @property
    def entry(self) -> StepNode | None:
        for node in self.steps:
            if node.spec.start:
                return node
        return self.steps[0] if self.steps else None

    def next_after(self, node: StepNode) -> StepNode | None:
        following = node.index + 1
        return self.steps[following] if following < len(self.steps) else None

    def describe(self) -> str:
        """'the flow' or "the loop body of step 'x'", for messages."""
        if self.owner is None:
            return "the flow"
        if self.kind == "delegate":
            return f"the delegates of step '{self.owner.id}'"
        return f"the {self.kind} body of step '{self.owner.id}'"

    @property
    def home(self) -> Region:
        """The list the region's steps are written in (a delegated step's is its delegator's, which may
        be delegated in turn; steps that delegate to each other — BY320 — end the chain)."""
        region: Region = self
        seen: set[int] = set()
        while region.kind == "delegate" and region.owner is not None and id(region) not in seen:
            seen.add(id(region))
            region = region.owner.region
        return region


@dataclass(eq=False)
class FlowIndex:
    """Everything the checks of one flow share."""

    definition: FlowDef
    project: Project
    root: Region
    regions: list[Region]
    nodes: list[StepNode]
    by_id: dict[str, StepNode]
    found: list[Diagnostic] = field(default_factory=list)
    broken: bool = False  # a problem that would make graph and dataflow findings misleading

    @property
    def doc(self) -> Document:
        return self.definition.doc

    @property
    def name(self) -> str:
        return self.definition.spec.flow

    def report(self, path: JsonPath, code: str, message: str, *, key: bool = False) -> None:
        self.found.append(issue(self.doc, path, code, message, key=key))

    def walk(self) -> Iterator[StepNode]:
        yield from self.nodes


def build_index(project: Project, definition: FlowDef) -> FlowIndex:
    """Group the flow's steps into regions and resolve what each step refers to."""
    flow = definition.spec
    root = Region("flow", None, ("steps",), ())
    index = FlowIndex(definition, project, root, [root], [], {})
    regions: dict[StepList, Region] = {}
    delegated: dict[StepList, set[str]] = {}
    detached: list[tuple[Region, str, StepList]] = []  # (region, the delegated step, its list)
    made: dict[StepList, list[StepNode]] = {}
    for walked in walk_steps(flow.steps):
        spec, steps = walked.step, walked.list
        region = regions.setdefault(steps, root)
        if steps not in delegated:
            delegated[steps] = delegated_ids(steps.steps, lambda step: is_agent_step(step, project))
        home = region
        if spec.id in delegated[steps]:  # a region of its own, owned by its delegator (set below)
            home = Region("delegate", None, region.path, region.items)
            detached.append((home, spec.id, steps))
            index.regions.append(home)
        node = StepNode(spec, walked.path, home, len(home.steps))
        ref = (
            spec.uses
            if spec.uses is not None
            else (spec.map.uses if spec.map is not None else None)
        )
        if ref is not None:
            node.block = project.block(ref)
        if spec.flow is not None:
            node.subflow = project.flow(spec.flow)
        home.steps.append(node)
        home.by_id.setdefault(spec.id, node)
        made.setdefault(steps, []).append(node)
        index.nodes.append(node)
        index.by_id.setdefault(spec.id, node)
        for body in walked.bodies:
            inner = regions[body] = Region(
                body.kind, node, body.path, (*home.items, body.item) if body.item else home.items
            )
            node.body = inner
            index.regions.append(inner)
    for home, name, steps in detached:
        home.owner = next(
            node for node in made[steps] if name in node.spec.delegates and node.id != name
        )
    return index


def is_agent_step(spec: StepSpec, project: Project) -> bool:
    block = project.block(spec.uses) if spec.uses is not None else None
    return block is not None and block.spec.kind == "agent"


def catalog(project: Project) -> Catalog:
    """The project's blocks and flows, as delegation follows them (engine/spec/delegation.py)."""

    def block(ref: str) -> BlockSpec | None:
        found = project.block(ref)
        return found.spec if found is not None else None

    def flow(name: str) -> FlowSpec | None:
        found = project.flow(name)
        return found.spec if found is not None else None

    return Catalog(block, flow)
