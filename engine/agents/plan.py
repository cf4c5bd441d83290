"""What an agent is made of, decided at compile time, and what one execution of it carries.

`AgentPlan`: the block, the names of the tools it may call, its delegates (sub-agents offered
as tools), the bound on turns. `AgentRun`: one execution — the block call (inputs, run services,
event writer) and the chat model — handed to the agent's graph as its runtime context.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langgraph.types import RetryPolicy

from engine.core.errors import BlockyardError
from engine.core.values import JsonDict
from engine.spec import AgentBlock
from engine.spec.block import DEFAULT_MAX_ITERATIONS

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    from engine.models.agentic import AgentModel
    from engine.nodes.call import BlockCall
    from engine.nodes.context import RunContext

MAX_TOOL_ERRORS = 3  # failed tool calls an agent may see (and recover from) before its step fails


class AgentFailed(BlockyardError):
    """An agent could not finish: turns used up, too many failed tool calls, or a model failure
    that retries did not cure. Never retried as a whole (its tools may have had effects)."""

    code = "agent_failed"


Invoke = Callable[[JsonDict, "AgentRun", "Runtime[RunContext]"], Awaitable[JsonDict]]


@dataclass(frozen=True)
class Delegate:
    """A sub-agent offered as a tool: an agent block, an agent step of the flow, or a whole flow.

    `invoke(args, run, runtime)` runs it with the model's arguments (already checked against
    `parameters`) and returns its outputs; it raises StepFailed when it fails. `retry` is the
    policy of its node in the agent's graph, and `will_retry(exc, attempt)` says whether that
    policy takes another attempt after `exc` (else the failure goes back to the model).
    """

    name: str
    kind: str  # agent | step | flow
    description: str
    parameters: JsonDict = field(repr=False)
    invoke: Invoke = field(repr=False)
    retry: RetryPolicy | None = field(default=None, repr=False)
    will_retry: Callable[[BaseException, int], bool] = field(
        default=lambda exc, attempt: False, repr=False
    )
    # whether a run may wait for a person inside it (an approval gate, a tool call to decide)
    pauses: bool = False


@dataclass(frozen=True)
class AgentPlan:
    flow: str
    where: str  # "flow 'f', step 's'" for messages
    block: AgentBlock
    tools: tuple[str, ...]
    delegates: tuple[Delegate, ...] = ()
    depth: int = 0

    @property
    def max_iterations(self) -> int:
        return self.block.max_iterations or DEFAULT_MAX_ITERATIONS

    @property
    def pauses(self) -> bool:
        """Whether the loop may wait for a person: a tool call to decide (`approve_tools`), or a
        delegate that may wait. Such a loop keeps checkpoints of its own (engine/agents/graph.py)."""
        return bool(self.block.approve_tools) or any(d.pauses for d in self.delegates)

    def delegate(self, name: str) -> Delegate | None:
        return next((d for d in self.delegates if d.name == name), None)


@dataclass
class AgentRun:
    """One execution of an agent (the runtime context of its graph)."""

    plan: AgentPlan
    call: BlockCall
    model: AgentModel
    offered: tuple[JsonDict, ...]  # the functions the model sees, the answer function last
    answer: JsonDict  # the answer function alone (the last turn)
    # failed tool calls in order: {tool, error}
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.call.label

    def offers(self, name: str) -> bool:
        return name in self.plan.tools or self.plan.delegate(name) is not None
