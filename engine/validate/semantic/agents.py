"""What an agent is offered: the names its model sees, and how deep delegation goes.

An agent's model is offered its tools, its delegates (agent blocks, agent steps of the same list,
flows) and one more function, `final_answer`, that it answers with. BY441: a name offered twice
(a tool and a delegate) would be ambiguous; BY442: no tool or delegate may be called
`final_answer`. BY440: agents within agents go at most MAX_DELEGATION_DEPTH levels deep — each
agent, and each flow an agent delegates to, is one level, counted the way the compiler follows
delegation (a `flow:` step runs its subflow at the level of the step). Cycles are BY320's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.diagnostics import Diagnostic
from engine.load import JsonPath
from engine.project import Project
from engine.spec import BlockSpec, StepSpec
from engine.spec.block import ANSWER_TOOL, MAX_DELEGATION_DEPTH
from engine.spec.walk import delegated_ids, step_lists
from engine.validate.semantic.index import FlowIndex, is_agent_step, issue

Chain = tuple[str, ...]  # the agents and delegated flows of the deepest path, outermost first


def check_agent_blocks(project: Project) -> list[Diagnostic]:
    """BY441 and BY442 for the tools and delegates of every agent block."""
    found: list[Diagnostic] = []
    for versions in project.blocks.values():
        for definition in versions.values():
            spec = definition.spec
            if spec.kind != "agent":
                continue
            for path, code, message in _offered(spec.tools, spec.delegates, ()):
                found.append(issue(definition.doc, path, code, f"block '{spec.block}': {message}"))
    return found


def _offered(tools: list[str], delegates: list[str], prefix: JsonPath, *, block_tools: list[str] | None = None
             ) -> Iterator[tuple[JsonPath, str, str]]:
    """Problems of the names an agent is offered: `tools` (written at prefix/tools, or the block's own
    `block_tools` when the step only adds delegates) and `delegates` (at prefix/delegates)."""
    for position, name in enumerate(tools):
        if name == ANSWER_TOOL:
            yield (*prefix, "tools", position), "BY442", _reserved("tool")
    for position, name in enumerate(delegates):
        if name == ANSWER_TOOL:
            yield (*prefix, "delegates", position), "BY442", _reserved("delegate")
        elif name in (block_tools if block_tools is not None else tools):
            yield ((*prefix, "delegates", position), "BY441",
                   f"'{name}' is offered to the agent both as a tool and as a delegate; its model could not "
                   "tell them apart: rename one of them")


def _reserved(what: str) -> str:
    return (f"a {what} cannot be called '{ANSWER_TOOL}': that is the name of the function the agent gives its "
            f"final answer with; rename the {what}")


def check_agent_steps(index: FlowIndex) -> None:
    """BY441 and BY442 for the delegates agent steps add; BY440 for chains of agents nested too deep."""
    for node in index.walk():
        block = node.runs_block
        if block is not None and block.kind == "agent" and node.spec.delegates:
            for path, code, message in _offered([], node.spec.delegates, node.path, block_tools=block.tools):
                index.report(path, code, f"step '{node.id}': {message}")
    depth = _Depth(index.project)
    for listed in step_lists(index.definition.spec.steps):
        for position, step, chain in depth.chains(index.name, listed.steps):
            if len(chain) > MAX_DELEGATION_DEPTH:
                where = (*listed.path, position, *_key(step))
                index.report(where, "BY440",
                             f"step '{step.id}': delegation is nested more than {MAX_DELEGATION_DEPTH} levels deep "
                             f"({' -> '.join(chain)}); agents and the flows they delegate to nest at most "
                             f"{MAX_DELEGATION_DEPTH} levels")


def _key(step: StepSpec) -> JsonPath:
    """Where a step names the agent or flow its chain starts at."""
    if step.flow is not None:
        return ("flow",)
    return ("uses",) if step.uses is not None else ("map", "uses")


@dataclass(frozen=True)
class _Step:
    """An agent step: its flow, its spec and the agent steps of its list it may delegate to."""

    flow: str
    spec: StepSpec
    siblings: dict[str, StepSpec]


@dataclass
class _Depth:
    """The deepest chain of agents below an agent or a flow, memoized (cycles count as no depth:
    BY320 reports them)."""

    project: Project
    _flows: dict[str, Chain] = field(default_factory=dict)
    _agents: dict[str, Chain] = field(default_factory=dict)
    _visiting: set[str] = field(default_factory=set)

    def flow(self, name: str) -> Chain:
        """The deepest chain among the agents a flow runs (its subflows' at the same level)."""
        if name in self._flows or name in self._visiting:
            return self._flows.get(name, ())
        definition = self.project.flow(name)
        if definition is None:
            return ()
        self._visiting.add(name)
        best: Chain = ()
        for listed in step_lists(definition.spec.steps):
            for _, _, chain in self.chains(name, listed.steps):
                best = max(best, chain, key=len)
        self._visiting.discard(name)
        self._flows[name] = best
        return best

    def chains(self, flow: str, steps: list[StepSpec]) -> Iterator[tuple[int, StepSpec, Chain]]:
        """(position, step, its deepest chain) of the steps of one list that run agents or subflows
        (steps other agents of the list delegate to are reached through those)."""
        agents = {step.id: step for step in steps if is_agent_step(step, self.project)}
        delegated = delegated_ids(steps, lambda step: step.id in agents)
        siblings = {name: agents[name] for name in delegated}
        for position, step in enumerate(steps):
            if step.id in delegated:
                continue
            chain: Chain = ()
            if step.flow is not None:
                chain = self.flow(step.flow)
            elif step.id in agents:
                block = self._block(step.uses)
                chain = self.agent(block, _Step(flow, step, siblings)) if block is not None else ()
            elif step.map is not None and step.map.uses is not None:
                block = self._block(step.map.uses)
                chain = self.agent(block, None) if block is not None and block.kind == "agent" else ()
            if chain:
                yield position, step, chain

    def agent(self, block: BlockSpec, step: _Step | None) -> Chain:
        """This agent and the deepest chain below it (step delegates first, then the block's)."""
        key = f"step '{step.spec.id}' of flow '{step.flow}'" if step is not None and step.spec.delegates else \
            f"agent block '{block.block}'"
        if key in self._agents or key in self._visiting:
            return self._agents.get(key, ())
        self._visiting.add(key)
        best: Chain = ()
        for name in step.spec.delegates if step is not None else ():
            target = step.siblings.get(name) if step is not None else None
            if step is not None and target is not None:
                inner = self._block(target.uses)
                chain = self.agent(inner, _Step(step.flow, target, step.siblings)) if inner is not None else ()
            else:
                chain = self._delegated_flow(name)
            best = max(best, chain, key=len)
        for name in block.delegates:
            inner = self._block(name)
            chain = self.agent(inner, None) if inner is not None and inner.kind == "agent" else \
                self._delegated_flow(name)
            best = max(best, chain, key=len)
        self._visiting.discard(key)
        self._agents[key] = (key, *best)
        return self._agents[key]

    def _delegated_flow(self, name: str) -> Chain:
        if self.project.flow(name) is None:
            return ()
        return (f"flow '{name}'", *self.flow(name))

    def _block(self, ref: str | None) -> BlockSpec | None:
        definition = self.project.block(ref) if ref is not None else None
        return definition.spec if definition is not None else None

