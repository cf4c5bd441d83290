"""A block: a reusable unit of work, run by the generic executor of its kind."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt

from engine.spec.common import (
    Duration,
    ModelProfile,
    Name,
    RetrySpec,
    Spec,
    TypeSpec,
    empty_dict,
    empty_list,
)

BlockKind = Literal[
    "llm", "decide", "agent", "smart", "tool", "transform", "memory_read", "memory_write", "wait"
]
BLOCK_KINDS: tuple[str, ...] = BlockKind.__args__  # type: ignore[attr-defined]
MODEL_KINDS = frozenset({"llm", "decide", "agent", "smart"})
MEMORY_KINDS = frozenset({"memory_read", "memory_write"})
# Which kinds read each block key (unset: every kind). Written anywhere else, the key would be silently
# ignored: the validator reports it (BY356, engine/validate/semantic/blocks.py), and the published
# schema refuses it by shape (engine/spec/export.py), so that an editor shows each kind its own keys.
KIND_KEYS: dict[str, frozenset[str]] = {
    "prompt": MODEL_KINDS,
    "model": MODEL_KINDS,
    "tools": frozenset({"agent"}),
    "delegates": frozenset({"agent"}),
    "max_iterations": frozenset({"agent"}),
    "approve_tools": frozenset({"agent"}),
    "mode": frozenset({"smart"}),
    "guardrails": frozenset({"smart"}),
    "compute": frozenset({"transform"}),
    "tool": frozenset({"tool"}),
    "duration": frozenset({"wait"}),
    "memory": MEMORY_KINDS,
    "history": MODEL_KINDS,
}
# What each kind must say: the validator reports a missing key with its own code (BY350-BY358), and the
# published schema requires it. `prompt` means a prompt with a user message; `outputs` at least one.
KIND_REQUIRES: dict[str, tuple[str, ...]] = {
    "llm": ("prompt", "outputs"),
    "decide": ("prompt", "outputs"),
    "agent": ("prompt", "outputs"),
    "smart": ("outputs",),
    "tool": ("tool",),
    "transform": ("compute",),
    "memory_read": ("memory", "outputs"),
    "memory_write": ("memory",),
    "wait": ("duration",),
}
DEFAULT_HISTORY = (
    20  # turns of a conversation an llm, decide or smart block is sent unless it says otherwise
)
MAX_DELEGATION_DEPTH = (
    8  # agents within agents (delegated flows count as a level): validate refuses deeper (BY440)
)
DEFAULT_MAX_ITERATIONS = 10  # an agent block's turns when it says nothing (`max_iterations`)
ToolDecision = Literal[
    "approve", "edit", "reject"
]  # what a person may decide on a call (`approve_tools`)
ANSWER_TOOL = "final_answer"  # the function an agent answers with: no tool or delegate may take its name (BY442)


class PromptSpec(Spec):
    """Jinja2 templates (sandboxed, strict) that see the block's inputs."""

    system: str | None = Field(None, description="System message template.")
    user: str | None = Field(None, description="User message template.")
    system_file: str | None = Field(
        None,
        description="A file of the yard holding the system message template, "
        "e.g. prompts/manager.md (instead of `system`).",
    )
    user_file: str | None = Field(
        None,
        description="A file of the yard holding the user message template (instead of `user`).",
    )


class MemorySpec(Spec):
    """Which memory item a memory_read / memory_write block touches, in the run's memory scope."""

    namespace: Literal["preferences", "history"] = Field(
        "preferences",
        description="preferences (key-value facts) or history (past runs of the flow).",
    )
    key: str | None = Field(
        None, description="Item key (template); memory_read without a key reads all items."
    )


class GuardrailSpec(Spec):
    """smart blocks: checks of each prediction; a failing one is predicted again, up to `attempts`."""

    shape: bool = Field(
        True, description="Outputs must match their declared types (the JSON shape)."
    )
    max_length: int | None = Field(
        None, ge=1, description="Longest text output allowed, in characters."
    )
    attempts: int = Field(3, ge=1, le=10, description="Predictions tried before the step fails.")


class BlockSpec(Spec):
    """A block file: blocks/<id>.yaml."""

    block: Name = Field(..., description="Unique block id; the file is blocks/<id>.yaml.")
    version: int = Field(
        1,
        ge=1,
        lt=2**31,
        description="Bump on any change of contract or prompt; steps may pin `uses: id@version`.",
    )
    description: str | None = Field(None, description="What the block does, in one sentence.")
    kind: BlockKind = Field(..., description="Which generic executor runs the block.")
    inputs: dict[Name, TypeSpec] = Field(
        default_factory=empty_dict, description="What the block reads."
    )
    outputs: dict[Name, TypeSpec] = Field(
        default_factory=empty_dict, description="What the block writes into the flow's context."
    )
    prompt: PromptSpec | None = Field(
        None, description="Prompt templates (llm, decide, agent, smart)."
    )
    model: Name | ModelProfile | None = Field(
        None, description="A model profile name from blockyard.yaml, or an inline profile."
    )
    history: Literal["all", "none"] | Annotated[StrictInt, Field(ge=0, le=10_000)] | None = Field(
        None,
        description="In a conversation thread's turn: how much of the conversation the model is sent before "
        "the prompt: all, none, or the last N turns (default: all for agent blocks, 20 for the "
        "others). See docs/memory.md.",
    )
    tools: list[Name] = Field(
        default_factory=empty_list, description="Tool names the agent may call."
    )
    delegates: list[Name] = Field(
        default_factory=empty_list,
        description="agent: other agent blocks or flows offered as tools.",
    )
    max_iterations: int | None = Field(
        None, ge=1, le=100, description="agent: bound on model turns."
    )
    approve_tools: dict[Name, Annotated[list[ToolDecision], Field(min_length=1, max_length=3)]] = (
        Field(
            default_factory=empty_dict,
            description="agent: tools a person decides on before each call, each with the decisions "
            "allowed: approve (run it as the model asked), edit (run it with changed arguments), reject "
            "(do not run it; the reason goes back to the model). See docs/agents.md.",
        )
    )
    mode: Literal["predict", "chain_of_thought"] | None = Field(
        None, description="smart: DSPy module."
    )
    guardrails: GuardrailSpec | None = Field(
        None, description="smart: checks of each prediction, retried."
    )
    compute: dict[Name, str] | None = Field(
        None, description="transform: output name -> Jinja2 expression over the inputs."
    )
    tool: Name | None = Field(None, description="tool: the registered tool this block calls.")
    duration: Duration | None = Field(None, description="wait: how long to wait.")
    memory: MemorySpec | None = Field(
        None, description="memory_read / memory_write: the item touched."
    )
    retry: RetrySpec | None = Field(None, description="Retry policy for transient failures.")
    timeout: Duration | None = Field(None, description="Limit on one execution of the block.")
    category: str | None = Field(
        None, description="Free-form group, for `blockyard blocks --category`."
    )
    tags: list[str] = Field(
        default_factory=empty_list, description="Labels, for `blockyard blocks --tag`."
    )

    @property
    def history_turns(self) -> int | None:
        """How many earlier turns of a conversation the block is sent: None for all of them."""
        if self.history is None:
            return None if self.kind == "agent" else DEFAULT_HISTORY
        if self.history == "all":
            return None
        if self.history == "none":
            return 0
        return int(self.history)

    @property
    def ref(self) -> str:
        return f"{self.block}@{self.version}"
