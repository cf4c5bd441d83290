"""Following delegation: whom an agent may call, and how deep agents nest below an agent or a flow.

One computation, below both of its users: the validator judges with it (BY320, an agent that could
end up calling itself, and BY440, agents nested deeper than MAX_DELEGATION_DEPTH:
engine/validate/semantic/delegation.py and agents.py), and the compiler, which trusts the validator,
builds each delegate it finds (engine/compile/agent.py). Names resolve against a `Catalog`: the
project when validating, the pinned bundle when compiling.

An agent runs at a step (or for a map), or as the delegate of another agent. It may call its
step's delegates — agent steps of the step's own list that an agent of the list delegates to
(engine/spec/walk.py, `delegated_ids`), or flows — then its block's: agent blocks or flows. A name
that is both an agent and a flow is the agent. An agent step with delegates of its own is another
agent than its block alone, so it has a key of its own; keys name the levels of a chain the way
messages show them ("agent block 'a'", "step 's' of flow 'f'", "flow 'f'").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from engine.spec.block import AgentBlock, BlockSpec
from engine.spec.flow import FlowSpec, StepSpec
from engine.spec.walk import delegated_ids, step_lists

Chain = tuple[str, ...]  # the keys of agents and delegated flows, outermost first


@dataclass(frozen=True)
class Catalog:
    """What delegation resolves names against (the project's definitions, or a pinned bundle's)."""

    block: Callable[[str], BlockSpec | None]  # a block reference ("name" or "name@2"), of any kind
    flow: Callable[[str], FlowSpec | None]

    def agent(self, ref: str | None) -> AgentBlock | None:
        """The agent block `ref` names, or None (no such block, or not an agent)."""
        block = self.block(ref) if ref is not None else None
        return block if isinstance(block, AgentBlock) else None


@dataclass(frozen=True)
class Callee:
    """One name an agent's delegates list: what it resolves to and where it is written."""

    name: str
    position: int  # in the `delegates` list it is written in
    of: Literal["step", "block"]  # whose `delegates` list: the step's or the block's
    # None: it names nothing an agent can call (BY213, BY218)
    kind: Literal["step", "agent", "flow"] | None
    block: AgentBlock | None = None  # the agent block, for a step or an agent
    step: StepSpec | None = None  # the delegated step, for a step


@dataclass(frozen=True)
class Agent:
    """An agent block where it runs: at `step` of `flow` (with the delegated agent steps of the step's
    list, by id), or with no step (a map's agent, another agent's delegate)."""

    block: AgentBlock
    flow: str
    step: StepSpec | None = None
    siblings: Mapping[str, StepSpec] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """This agent in a chain: the step, when its delegates make it another agent than its block."""
        if self.step is not None and self.step.delegates:
            return f"step '{self.step.id}' of flow '{self.flow}'"
        return f"agent block '{self.block.block}'"

    def callees(self, catalog: Catalog) -> Iterator[Callee]:
        """Every name it is offered as a delegate, in order: its step's, then its block's (a name in
        both is listed twice; the compiler offers the step's)."""
        if self.step is not None:
            yield from step_callees(self.step, self.siblings, catalog)
        yield from block_callees(self.block, catalog)

    def inner(self, callee: Callee) -> Agent:
        """The agent a step or agent callee runs (its own step delegates stay in the same list)."""
        assert callee.block is not None, "only a step or an agent callee runs an agent"
        if callee.kind == "step":
            return Agent(callee.block, self.flow, callee.step, self.siblings)
        return Agent(callee.block, self.flow)


def flow_key(name: str) -> str:
    """A delegated flow in a chain."""
    return f"flow '{name}'"


def step_callees(
    step: StepSpec, siblings: Mapping[str, StepSpec], catalog: Catalog
) -> Iterator[Callee]:
    """What the names of a step's `delegates` resolve to: a delegated agent step of its list, else a flow."""
    for position, name in enumerate(step.delegates):
        target = siblings.get(name)
        block = catalog.agent(target.uses) if target is not None else None
        if target is not None and block is not None:
            yield Callee(name, position, "step", "step", block, target)
        elif catalog.flow(name) is not None:
            yield Callee(name, position, "step", "flow")
        else:
            yield Callee(name, position, "step", None)


def block_callees(block: AgentBlock, catalog: Catalog) -> Iterator[Callee]:
    """What the names of an agent block's `delegates` resolve to: an agent block, else a flow."""
    for position, name in enumerate(block.delegates):
        agent = catalog.agent(name)
        if agent is not None:
            yield Callee(name, position, "block", "agent", agent)
        elif catalog.flow(name) is not None:
            yield Callee(name, position, "block", "flow")
        else:
            yield Callee(name, position, "block", None)


def agent_steps(steps: list[StepSpec], catalog: Catalog) -> dict[str, StepSpec]:
    """The steps of one list that run an agent block, by id."""
    return {
        step.id: step
        for step in steps
        if step.uses is not None and catalog.agent(step.uses) is not None
    }


@dataclass
class Depth:
    """The deepest chain of agents below an agent or a flow, memoized. Each agent, and each flow an
    agent delegates to, is one level; a `flow:` step runs its subflow at its own level. A cycle counts
    as no depth (it is BY320's)."""

    catalog: Catalog
    _flows: dict[str, Chain] = field(default_factory=dict)
    _agents: dict[str, Chain] = field(default_factory=dict)
    _visiting: set[str] = field(default_factory=set)

    def flow(self, name: str) -> Chain:
        """The deepest chain among the agents a flow runs (its subflows' at the same level)."""
        if name in self._flows or name in self._visiting:
            return self._flows.get(name, ())
        spec = self.catalog.flow(name)
        if spec is None:
            return ()
        self._visiting.add(name)
        best: Chain = ()
        for listed in step_lists(spec.steps):
            for _, _, chain in self.chains(name, listed.steps):
                best = max(best, chain, key=len)
        self._visiting.discard(name)
        self._flows[name] = best
        return best

    def chains(self, flow: str, steps: list[StepSpec]) -> Iterator[tuple[int, StepSpec, Chain]]:
        """(position, step, its deepest chain) of the steps of one list that run agents or subflows
        (steps other agents of the list delegate to are reached through those)."""
        agents = agent_steps(steps, self.catalog)
        delegated = delegated_ids(steps, lambda step: step.id in agents)
        siblings = {name: agents[name] for name in delegated}
        for position, step in enumerate(steps):
            if step.id in delegated:
                continue
            chain: Chain = ()
            if step.flow is not None:
                chain = self.flow(step.flow)
            elif step.id in agents:
                block = self.catalog.agent(step.uses)
                chain = self.agent(Agent(block, flow, step, siblings)) if block is not None else ()
            elif step.map is not None and step.map.uses is not None:
                block = self.catalog.agent(step.map.uses)
                chain = self.agent(Agent(block, flow)) if block is not None else ()
            if chain:
                yield position, step, chain

    def agent(self, agent: Agent) -> Chain:
        """This agent and the deepest chain below it."""
        key = agent.key
        if key in self._agents or key in self._visiting:
            return self._agents.get(key, ())
        self._visiting.add(key)
        best: Chain = ()
        for callee in agent.callees(self.catalog):
            if callee.kind == "flow":
                chain = self._delegated_flow(callee.name)
            elif callee.kind is not None:
                chain = self.agent(agent.inner(callee))
            else:
                chain = ()
            best = max(best, chain, key=len)
        self._visiting.discard(key)
        self._agents[key] = (key, *best)
        return self._agents[key]

    def _delegated_flow(self, name: str) -> Chain:
        return (flow_key(name), *self.flow(name))
