"""What a compiled graph needs from the outside world at run time.

Passed per run as LangGraph's runtime context (`graph.ainvoke(..., context=RunContext(...))`),
so one compiled graph serves every run of a flow version. The protocols keep the compiler
independent of the concrete model providers and tool registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.core.redaction import Masker
from engine.spec import ModelBlock
from engine.templates.limits import DEFAULT, TemplateLimits

if TYPE_CHECKING:  # its module writes events, which loads LangGraph: not for what only draws flows
    from engine.nodes.spend import RunSpend


class StructuredModel(Protocol):
    async def structured(self, request: Any) -> dict[str, Any]:
        """Ask for JSON matching request.output_schema; returns the validated object."""
        ...


class ModelSource(Protocol):
    def for_block(self, block: ModelBlock) -> StructuredModel: ...

    def agent_for_block(self, block: ModelBlock) -> Any:
        """The chat model an agent block takes its turns on (engine.models.agentic.AgentModel)."""
        ...


class ToolSource(Protocol):
    def get(self, name: str) -> Any: ...

    async def call(self, name: str, args: Mapping[str, Any]) -> Any: ...


class MemorySource(Protocol):
    """The run's long-term memory scope (the flow's `memory:`), loaded when the run starts."""

    scope: str

    def prompt_values(self) -> dict[str, Any]:
        """What prompts see: `user_preferences` (key -> value) and `user_history` (past runs)."""
        ...

    async def read(self, namespace: str, key: str | None) -> Any:
        """One item's value (None when absent); with no key every item: preferences as a mapping,
        history as a list of records, oldest first."""
        ...

    async def write(self, namespace: str, key: str, value: Any) -> None:
        """Store `value` under `key` (replacing what was there)."""
        ...


@dataclass(frozen=True)
class Restored:
    """What the steps of one LangGraph node finished when it ran before (a crash or a failure
    stopped it): their updates in order, the node it was going on to, and the number of the row its
    next step writes. When it stopped inside a map's items, `following` is the map's item node,
    `items` what the fan-out sent to it (one argument per item, in order) and `items_done` the
    updates of the items that finished, by position: only the others run again."""

    updates: list[Mapping[str, Any]]
    following: str
    seq: int
    items: list[Any] | None = None
    items_done: dict[int, Mapping[str, Any]] = field(default_factory=dict)


# The position of the map item running in this asyncio task, when a node runs a map's items itself
# (engine/compile/inline.py): the trace rows an item writes are committed with its own row
# (engine/state/durable.py, `running_task`).
INLINE_ITEM: ContextVar[int | None] = ContextVar("blockyard_inline_item", default=None)


class StepJournal(Protocol):
    """Where a durable run commits each step finished inside one LangGraph node, before the next
    begins (engine/state/journal.py; the node: engine/compile/inline.py). `ns` is the checkpoint
    namespace of the node's task, the same when LangGraph runs the task again."""

    async def restore(self, ns: str) -> Restored | None: ...

    async def finished(
        self,
        ns: str,
        seq: int,
        update: Mapping[str, Any],
        following: str,
        items: list[Any] | None = None,
    ) -> None: ...

    def item_finished(
        self, ns: str, seq: int, position: int, update: Mapping[str, Any]
    ) -> None: ...

    async def settle(self) -> None: ...

    def stopped(self) -> None: ...


@dataclass
class RunContext:
    run_id: str
    models: ModelSource
    tools: ToolSource
    workspace: Path
    thread_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    memory: MemorySource | None = None  # None: the flow has no `memory:` scope
    # the API keys to mask in what the run produces: outputs, the conversation, streamed tokens
    secrets: Masker = field(default_factory=Masker)
    limits: TemplateLimits = DEFAULT  # bounds on the run's templates (`limits:` of blockyard.yaml)
    # a conversation thread's turn: the conversation before it, (role, text) pairs oldest first, which
    # its model blocks are sent (engine/nodes/history.py); None when the run is not a thread turn
    conversation: tuple[tuple[str, str], ...] | None = None
    history_chars: int = 100_000  # `threads.history_chars` of blockyard.yaml
    turns_before: int = (
        0  # finished turns of the thread before this one (the checkpoint may keep fewer)
    )
    # a run with checkpoints (sync, async, exit): where the steps run inside one LangGraph node keep
    # their updates (engine/compile/inline.py); None without (none)
    journal: StepJournal | None = None
    # what the run's model calls spent and its budget (engine/nodes/spend.py); None: not counted
    spend: RunSpend | None = None
