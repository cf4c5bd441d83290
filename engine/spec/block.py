"""A block: a reusable unit of work, run by the generic executor of its kind.

No `from __future__ import annotations` here, as in engine/spec/flow.py: each kind's model inherits the
annotations of BlockBase, which pydantic would otherwise compile again from text for every kind.
"""

from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, StrictInt, TypeAdapter, model_validator

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
BLOCK_KINDS: tuple[str, ...] = get_args(BlockKind)
# Kinds that must produce at least one output (BY358; a decide block's one output has its own rule, BY353).
# The one requirement of a kind that is not a key of its model: an empty mapping is still a mapping.
PRODUCING = frozenset({"llm", "decide", "agent", "smart", "memory_read"})
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


def article(kind: str) -> str:
    """'an agent', 'an llm', 'a tool'."""
    return f"{'an' if kind[0] in 'aeiou' or kind == 'llm' else 'a'} {kind}"


class BlockBase(Spec):
    """What every block file says (blocks/<id>.yaml), whatever its kind; each kind is a model of its own
    below, and `BlockSpec` is their union, keyed by `kind`."""

    # each kind's model is built (pydantic's validator) when it is first used alone: a block is read
    # through the union (BLOCKS), which holds them all (see engine/spec/flow.py, StepBase)
    model_config = ConfigDict(defer_build=True)

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
    retry: RetrySpec | None = Field(None, description="Retry policy for transient failures.")
    timeout: Duration | None = Field(None, description="Limit on one execution of the block.")
    category: str | None = Field(
        None, description="Free-form group, for `blockyard blocks --category`."
    )
    tags: list[str] = Field(
        default_factory=empty_list, description="Labels, for `blockyard blocks --tag`."
    )

    @model_validator(mode="before")
    @classmethod
    def _unsaid(cls, data: Any) -> Any:
        """Another kind's key left empty (`tools: []`, `prompt: null`) says nothing: it is dropped, as the
        published schema allows it (engine/spec/export.py). Any other value of it is refused (BY356)."""
        if not isinstance(data, dict):
            return data
        foreign = [
            key
            for key, value in data.items()
            if key in KIND_KEYS and key not in cls.model_fields and (value is None or value == [])
        ]
        return (
            {key: value for key, value in data.items() if key not in foreign} if foreign else data
        )

    @property
    def ref(self) -> str:
        return f"{self.block}@{self.version}"


class ModelBlock(BlockBase):
    """The kinds that ask a model: llm, decide, agent, smart."""

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


_PROMPT = "Prompt templates (llm, decide, agent, smart); the prompt has a `user:` message."


class LlmBlock(ModelBlock):
    """One model call with a structured reply."""

    kind: Literal["llm"] = Field(..., description="Which generic executor runs the block.")
    prompt: PromptSpec = Field(..., description=_PROMPT)


class DecideBlock(ModelBlock):
    """A model call that picks one of an output's enum values, for a step's `branches:`."""

    kind: Literal["decide"] = Field(..., description="Which generic executor runs the block.")
    prompt: PromptSpec = Field(..., description=_PROMPT)


class AgentBlock(ModelBlock):
    """A model in a loop of tool calls (and delegations) until it answers."""

    kind: Literal["agent"] = Field(..., description="Which generic executor runs the block.")
    prompt: PromptSpec = Field(..., description=_PROMPT)
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


class SmartBlock(ModelBlock):
    """A DSPy program: a signature from the block's inputs and outputs, with guardrails."""

    kind: Literal["smart"] = Field(..., description="Which generic executor runs the block.")
    mode: Literal["predict", "chain_of_thought"] | None = Field(
        None, description="smart: DSPy module."
    )
    guardrails: GuardrailSpec | None = Field(
        None, description="smart: checks of each prediction, retried."
    )


class ToolBlock(BlockBase):
    """A call of one registered tool."""

    kind: Literal["tool"] = Field(..., description="Which generic executor runs the block.")
    tool: Name = Field(..., description="tool: the registered tool this block calls.")


class TransformBlock(BlockBase):
    """Outputs computed from the inputs by expressions, without a model."""

    kind: Literal["transform"] = Field(..., description="Which generic executor runs the block.")
    compute: dict[Name, str] = Field(
        ..., description="transform: output name -> Jinja2 expression over the inputs."
    )


class MemoryReadBlock(BlockBase):
    """Reads an item of the run's memory scope."""

    kind: Literal["memory_read"] = Field(..., description="Which generic executor runs the block.")
    memory: MemorySpec = Field(..., description="memory_read / memory_write: the item touched.")


class MemoryWriteBlock(BlockBase):
    """Writes the block's inputs to an item of the run's memory scope."""

    kind: Literal["memory_write"] = Field(..., description="Which generic executor runs the block.")
    memory: MemorySpec = Field(..., description="memory_read / memory_write: the item touched.")


class WaitBlock(BlockBase):
    """Waits, without holding a worker (docs/runtime.md)."""

    kind: Literal["wait"] = Field(..., description="Which generic executor runs the block.")
    duration: Duration = Field(..., description="wait: how long to wait.")


# A block: one model per kind, chosen by `kind`. Code narrows it with isinstance (or by `kind`), so a tool
# block's `tool` is known to be there by its type, not checked again at run time.
BlockSpec = Annotated[
    LlmBlock
    | DecideBlock
    | AgentBlock
    | SmartBlock
    | ToolBlock
    | TransformBlock
    | MemoryReadBlock
    | MemoryWriteBlock
    | WaitBlock,
    Field(discriminator="kind"),
]
BLOCK_MODELS: dict[str, type[BlockBase]] = {
    get_args(model.model_fields["kind"].annotation)[0]: model
    for model in get_args(get_args(BlockSpec)[0])
}
BLOCKS: TypeAdapter[BlockSpec] = TypeAdapter(BlockSpec)
# The kinds that ask a model (their models are ModelBlocks) and the kinds that touch memory
MODEL_KINDS = frozenset(
    kind for kind, model in BLOCK_MODELS.items() if issubclass(model, ModelBlock)
)
MEMORY_KINDS = frozenset(
    kind for kind, model in BLOCK_MODELS.items() if "memory" in model.model_fields
)
# Each key only some kinds have -> those kinds: from the models above, the one place a kind's keys are said
KIND_KEYS: dict[str, frozenset[str]] = {
    key: frozenset(kind for kind, model in BLOCK_MODELS.items() if key in model.model_fields)
    for key in dict.fromkeys(key for model in BLOCK_MODELS.values() for key in model.model_fields)
    if key not in BlockBase.model_fields
}
# What each kind must say: the keys its model requires (a missing one is reported with its own code and
# words, MISSING_KEY), and `outputs` for the kinds that produce some (PRODUCING)
KIND_REQUIRES: dict[str, tuple[str, ...]] = {
    kind: tuple(
        key
        for key, field in model.model_fields.items()
        if field.is_required() and key not in BlockBase.model_fields
    )
    + (("outputs",) if kind in PRODUCING else ())
    for kind, model in BLOCK_MODELS.items()
}
# code, words (after "{article(kind)} block needs ") of each key a kind requires, for the validator
MISSING_KEY: dict[str, tuple[str, str]] = {
    "prompt": ("BY354", "`prompt:` with a `user:` message"),
    "tool": ("BY351", "`tool:`, the registered tool it calls"),
    "duration": ("BY352", "`duration:`, e.g. duration: 30s"),
    "compute": ("BY350", "`compute:`, one expression per output"),
    "memory": ("BY355", "`memory:` (namespace and key)"),
}


def called_tools(block: BlockSpec) -> list[str]:
    """The registered tools a block may call: an agent's `tools`, a tool block's `tool`."""
    if isinstance(block, AgentBlock):
        return list(block.tools)
    return [block.tool] if isinstance(block, ToolBlock) else []


def parse_block(data: Any) -> BlockSpec:
    """A block from its document (or a pinned copy): the model of its kind. Raises pydantic's
    ValidationError; `blockyard validate` explains each error with its code (engine/definitions/schema.py)."""
    return BLOCKS.validate_python(data)


def missing_words(kind: str, key: str) -> tuple[str, str]:
    """(code, message) for a block of `kind` without `key`, which that kind requires."""
    code, words = MISSING_KEY[key]
    return code, f"{article(kind)} block needs {words}"


def foreign_words(kind: str, key: str) -> str:
    """Why `key`, a key of other kinds, is refused on a block of `kind` (BY356)."""
    fits = ", ".join(sorted(KIND_KEYS[key]))
    return f"`{key}` does not apply to {article(kind)} block (only to {fits})"
