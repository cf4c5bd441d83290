"""A flow: steps wired into a graph (list order, needs, goto, branches, routers, loops, ...).

No `from __future__ import annotations` here: the models' annotations are objects, not texts pydantic must
evaluate for each model and again for each model that inherits them (the actions' models inherit twenty
from StepBase), at `blockyard validate`'s start (docs/performance.md, "Validation in detail").
"""

from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, TypeAdapter, model_validator

from engine.core.values import JsonDict
from engine.spec.budget import BudgetSpec
from engine.spec.common import (
    Durability,
    Duration,
    Name,
    Spec,
    Synchronous,
    TypeSpec,
    empty_dict,
    empty_list,
)

Target = Name  # a step id, or `end`
END = "end"
ACTIONS = ("uses", "router", "loop", "foreach", "map", "approval", "flow")
# keys of a step that only some actions read (the validator reports them elsewhere, BY317; the published
# schema refuses them by shape, engine/spec/export.py)
ACTION_KEYS: dict[str, tuple[str, ...]] = {"with": ("uses", "flow"), "outputs": ("uses", "flow")}


def enum_text(value: object) -> str:
    """How a decide value is written as a `branches:` key (YAML keys are text: true, 3, null)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _goto() -> Any:
    # each condition's model says `goto` after its condition, as rules are written (and dumped)
    return Field(..., description="The step to go to, or `end`.")


class RouteBase(Spec):
    """One router rule: the first rule that matches picks the next step. Each condition is a model of its
    own below, with its condition and `goto` (`Route` is their union, chosen by the condition a rule says)."""

    kind: ClassVar[str]  # the rule's condition: its one key besides `goto`
    model_config = ConfigDict(defer_build=True)  # read through the union (see StepBase)

    @property
    def condition(self) -> str:
        """What the rule's condition says: the text it looks for, or its expression."""
        said: str = getattr(self, self.kind)
        return said

    @model_validator(mode="before")
    @classmethod
    def _unsaid(cls, data: Any) -> Any:
        """Another condition left null says nothing: it is dropped (the published schema allows it)."""
        if not isinstance(data, dict) or None not in data.values():
            return data  # the usual rule: nothing to drop, nothing copied
        return {
            key: value
            for key, value in data.items()
            if not (value is None and key in ROUTE_CONDITIONS and key != cls.kind)
        }


class ContainsRoute(RouteBase):
    kind: ClassVar[str] = "contains"
    contains: str = Field(..., description="Matches when the value contains this text.")
    goto: Target = _goto()


class EqualsRoute(RouteBase):
    kind: ClassVar[str] = "equals"
    equals: str = Field(
        ..., description="Matches when the value equals this text (case-insensitive)."
    )
    goto: Target = _goto()


class StartsWithRoute(RouteBase):
    kind: ClassVar[str] = "starts_with"
    starts_with: str = Field(..., description="Matches when the value starts with this text.")
    goto: Target = _goto()


class RegexRoute(RouteBase):
    kind: ClassVar[str] = "regex"
    regex: str = Field(..., description="Matches when this RE2 regular expression finds a match.")
    goto: Target = _goto()


class ExprRoute(RouteBase):
    kind: ClassVar[str] = "expr"
    expr: str = Field(..., description="Matches when this bare Jinja2 expression is truthy.")
    goto: Target = _goto()


# A router rule's conditions, each a model above: the one list the validator, the compiler and the React
# Flow interchange read (docs/architecture.md, "Where to change"); the first four look at the router's text
ROUTE_MODELS: dict[str, type[RouteBase]] = {
    model.kind: model
    for model in (ContainsRoute, EqualsRoute, StartsWithRoute, RegexRoute, ExprRoute)
}
ROUTE_CONDITIONS = tuple(ROUTE_MODELS)
TEXT_CONDITIONS = ROUTE_CONDITIONS[:4]


def said_conditions(data: Any) -> list[str]:
    """The conditions a rule's document says (not null), in the list's order."""
    if not isinstance(data, dict):
        return []
    return [name for name in ROUTE_CONDITIONS if data.get(name) is not None]


def _condition_of(data: Any) -> str | None:
    """The first condition a rule says; None: refused, BY314 (`route_problem`)."""
    if isinstance(data, dict):
        for name in ROUTE_CONDITIONS:
            if data.get(name) is not None:
                return name
        return None
    return data.kind if isinstance(data, RouteBase) else None


Route = Annotated[
    Annotated[ContainsRoute, Tag("contains")]
    | Annotated[EqualsRoute, Tag("equals")]
    | Annotated[StartsWithRoute, Tag("starts_with")]
    | Annotated[RegexRoute, Tag("regex")]
    | Annotated[ExprRoute, Tag("expr")],
    Discriminator(_condition_of),
]


@cache
def _routes() -> TypeAdapter[Route]:
    return TypeAdapter(Route)


def parse_route(data: Any) -> Route:
    """A router rule from its document: the model of its condition. Raises pydantic's ValidationError."""
    return _routes().validate_python(data)


def route_problem(step: str, position: int, said: list[str]) -> str:
    """Why a router rule that says no condition, or several, is refused (BY314); `position` from 1."""
    if not said:
        return (
            f"step '{step}': router rule {position} has no condition; a router has one fallback, "
            f"`default:` (give the rule one of {', '.join(ROUTE_CONDITIONS)})"
        )
    return (
        f"step '{step}': router rule {position} has several conditions ({', '.join(said)}); "
        "write one rule per condition"
    )


class RouterSpec(Spec):
    """Ordered rules over a value; targets are step ids or `end`."""

    value: str | None = Field(None, description="Template whose result the text rules look at.")
    routes: list[Route] = Field(default_factory=empty_list, description="Rules, tried in order.")
    default: Target = Field(..., description="Where to go when no rule matches.")


class LoopSpec(Spec):
    """A body run at least once, then again until `until` holds or the bound is reached."""

    steps: list["StepSpec"] = Field(..., min_length=1, description="The loop body.")
    until: str | None = Field(None, description="Bare expression checked after each iteration.")
    max_iterations: int = Field(..., ge=1, le=10_000, description="Bound on iterations.")
    on_exhausted: Literal["continue", "fail"] = Field(
        "continue", description="continue after the loop with a warning event, or fail the run."
    )


class ForeachSpec(Spec):
    """A sequential iterator: each iteration sees what the previous ones wrote."""

    items: str = Field(..., description="Bare expression giving the list to iterate.")
    as_: Name = Field(
        "item", alias="as", description="Name of the current item in templates and inputs."
    )
    steps: list["StepSpec"] = Field(..., min_length=1, description="The body, run once per item.")
    collect: Name | None = Field(
        None, description="Context key receiving one entry per item, in order."
    )


class MapSpec(Spec):
    """A parallel fan-out over items, joined in item order."""

    items: str = Field(..., description="Bare expression giving the list to fan out over.")
    as_: Name = Field(
        "item", alias="as", description="Name of the current item in templates and inputs."
    )
    uses: str | None = Field(None, description="Block run once per item (`id` or `id@version`).")
    with_: dict[Name, Any] = Field(
        default_factory=empty_dict, alias="with", description="Input bindings for `uses`."
    )
    steps: "list[StepSpec] | None" = Field(
        None, description="A body of steps run once per item, instead of `uses`."
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=1000, description="Bound on items in flight."
    )
    collect: Name | None = Field(
        None, description="Context key receiving one entry per item, in item order."
    )


class ApprovalSpec(Spec):
    """A human approval gate: the run pauses until someone approves or rejects."""

    message: str = Field(
        "Approve to continue?", description="Template shown to the person deciding."
    )
    fields: dict[Name, TypeSpec] = Field(
        default_factory=empty_dict,
        description="Typed values the person fills in; they land in the context.",
    )
    on_reject: Target | Literal["fail"] = Field(END, description="A step, `end`, or `fail`.")
    approvers: list[str] = Field(
        default_factory=empty_list, description="Names allowed to decide (empty: anyone)."
    )
    timeout: Duration | None = Field(None, description="How long the gate waits.")
    on_timeout: Literal["approve", "reject"] | Target = Field(
        "reject", description="approve, reject, or a step to go to when the timeout passes."
    )


class MemoryScope(Spec):
    """Where a flow's long-term memory lives."""

    scope: str = Field(
        ..., description="Template naming the memory scope, e.g. users/{{ inputs.user_id }}."
    )


# what a schedule does with fire times missed while the server was down (a flow's and a plan's schedule)
Misfire = Literal["skip", "run_once"]


class ScheduleSpec(Spec):
    """Run the flow on a cron schedule while `blockyard serve` is up."""

    cron: str = Field(
        ...,
        description="Cron expression: five fields (minute hour day-of-month month "
        "day-of-week) or a macro such as @daily; see docs/flows.md.",
    )
    timezone: str = Field("UTC", description="IANA time zone, e.g. Europe/Paris.")
    inputs: JsonDict = Field(default_factory=empty_dict, description="Inputs of scheduled runs.")
    misfire: Misfire = Field(
        "skip", description="What to do with fire times missed while the server was down."
    )


class EmitSpec(Spec):
    """A custom event the step publishes when it has finished (docs/flows.md, "Custom events")."""

    event: Name = Field(
        ...,
        description="The event's type, e.g. progress; not one of the engine's own "
        "event types (run_started, step_finished, token, ...).",
    )
    data: JsonDict = Field(
        default_factory=empty_dict,
        description="The event's data: literals or templates, rendered after the step "
        "finishes, with its outputs in scope.",
    )


Reduce = Literal["append", "merge"]


class StepOutput(Spec):
    """Where one block (or subflow) output goes, and how it combines with what the key holds."""

    to: Name | None = Field(None, description="The context key (default: the output's own name).")
    reduce: Reduce | None = Field(
        None,
        description="append: the output (a list) is added to the end of the key's list; merge: the "
        "output (an object) is merged into the key's object, its keys winning. Without it "
        "the output replaces the key's value.",
    )


class FlowOutput(Spec):
    """One flow output in the mapping form of `outputs:`."""

    description: str | None = Field(None, description="What the output is.")
    optional: bool = Field(
        False, description="A run may end without it (it is left out of the result)."
    )
    default: Any = Field(
        None, description="The value returned when the run ends without it; makes it optional."
    )

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set

    @property
    def required(self) -> bool:
        return not self.optional and not self.has_default


REQUIRED_OUTPUT = FlowOutput()


class StepBase(Spec):
    """One step: exactly one action (uses, router, loop, foreach, map, approval, flow).

    Each action is a model of its own below, which requires its action's key; `StepSpec` is their union,
    chosen by the action a step says. A second action is refused by the validator (BY301)."""

    # each action's model is built (pydantic's validator) only if it is used alone: a step is read through
    # the union of FlowSpec (and of the bodies), which holds them all; building each too would compile
    # that union once more per model at `blockyard validate`'s start (docs/performance.md)
    model_config = ConfigDict(defer_build=True)

    id: Name = Field(..., description="Unique step id within the flow.")
    description: str | None = Field(None, description="What the step is for.")
    start: bool = Field(False, description="Entry point of the flow (default: the first step).")
    uses: str | None = Field(None, description="Block to run: `id` or `id@version`.")
    flow: Name | None = Field(None, description="Subflow to run as this step.")
    with_: dict[Name, Any] = Field(
        default_factory=empty_dict,
        alias="with",
        description="Input bindings: literals or templates.",
    )
    outputs: dict[Name, Name | StepOutput] = Field(
        default_factory=empty_dict,
        description="block output -> context key (a rename), or -> {to, reduce}.",
    )
    needs: list[Name] = Field(
        default_factory=empty_list, description="Steps that must finish first (a DAG)."
    )
    goto: Target | None = Field(None, description="Explicit successor: a step id or `end`.")
    branches: dict[str, Target] | None = Field(
        None, description="decide steps: output value -> next step (or `end`)."
    )
    router: RouterSpec | None = Field(None, description="Rule-based routing step.")
    loop: LoopSpec | None = Field(None, description="Bounded loop over a body of steps.")
    foreach: ForeachSpec | None = Field(None, description="Sequential iteration over a list.")
    map: MapSpec | None = Field(None, description="Parallel fan-out over a list.")
    approval: ApprovalSpec | None = Field(None, description="Human approval gate.")
    require_approval: bool | ApprovalSpec = Field(
        False,
        description="Pause for approval before this step runs (true, or the gate's settings).",
    )
    delegates: list[Name] = Field(
        default_factory=empty_list,
        description="agent steps: other agent steps or flows offered as tools.",
    )
    emit: EmitSpec | list[EmitSpec] | None = Field(
        None,
        description="Custom events published after the step finishes: one, or a list (in order).",
    )
    max_visits: int | None = Field(
        None, ge=1, le=10_000, description="Bound on entries into this step (back-edges need it)."
    )
    on_max_visits: Target | Literal["fail"] = Field(
        "fail", description="Where to go when max_visits is reached: a step, `end`, or `fail`."
    )

    @property
    def action(self) -> str | None:
        present = [name for name in ACTIONS if getattr(self, name) is not None]
        return present[0] if len(present) == 1 else None

    @property
    def emits(self) -> list[EmitSpec]:
        """The step's custom events, in order (`emit:` may be one mapping or a list)."""
        if self.emit is None:
            return []
        return [self.emit] if isinstance(self.emit, EmitSpec) else list(self.emit)

    @property
    def actions(self) -> list[str]:
        return [name for name in ACTIONS if getattr(self, name) is not None]

    def output_key(self, name: str) -> str:
        """The context key a block (or subflow) output `name` is written to."""
        target = self.outputs.get(name)
        if isinstance(target, StepOutput):
            return target.to or name
        return target or name

    def output_reduce(self, name: str) -> str | None:
        """How output `name` combines with its key's value: append, merge, or None (replace)."""
        target = self.outputs.get(name)
        return target.reduce if isinstance(target, StepOutput) else None


def _action_of(data: Any) -> str | None:
    """The first action a step says; None: refused, BY300 (`no_action_words`). Asked of every step
    `validate` reads: a plain loop, the cheapest way to ask."""
    if isinstance(data, dict):
        for name in ACTIONS:
            if data.get(name) is not None:
                return name
        return None
    if isinstance(data, StepBase):
        return data.action or next(iter(data.actions), None)
    return None


class UsesStep(StepBase):
    uses: str = Field(..., description="Block to run: `id` or `id@version`.")


class FlowStep(StepBase):
    flow: Name = Field(..., description="Subflow to run as this step.")


class RouterStep(StepBase):
    router: RouterSpec = Field(..., description="Rule-based routing step.")


class LoopStep(StepBase):
    loop: LoopSpec = Field(..., description="Bounded loop over a body of steps.")


class ForeachStep(StepBase):
    foreach: ForeachSpec = Field(..., description="Sequential iteration over a list.")


class MapStep(StepBase):
    map: MapSpec = Field(..., description="Parallel fan-out over a list.")


class ApprovalStep(StepBase):
    approval: ApprovalSpec = Field(..., description="Human approval gate.")


# A step: the model of its action (the one list of actions is ACTIONS, each with its model here)
StepSpec = Annotated[
    Annotated[UsesStep, Tag("uses")]
    | Annotated[RouterStep, Tag("router")]
    | Annotated[LoopStep, Tag("loop")]
    | Annotated[ForeachStep, Tag("foreach")]
    | Annotated[MapStep, Tag("map")]
    | Annotated[ApprovalStep, Tag("approval")]
    | Annotated[FlowStep, Tag("flow")],
    Discriminator(_action_of),
]
STEP_MODELS: dict[str, type[StepBase]] = {
    "uses": UsesStep,
    "router": RouterStep,
    "loop": LoopStep,
    "foreach": ForeachStep,
    "map": MapStep,
    "approval": ApprovalStep,
    "flow": FlowStep,
}


@cache
def _steps() -> TypeAdapter[StepSpec]:
    return TypeAdapter(StepSpec)


def parse_step(data: Any) -> StepSpec:
    """A step from its document: the model of its action. Raises pydantic's ValidationError."""
    return _steps().validate_python(data)


def no_action_words(step: str) -> str:
    """Why a step that says no action is refused (BY300)."""
    return f"step '{step}' does nothing: give it one of uses, flow, router, loop, foreach, map or approval"


class FlowSpec(Spec):
    """A flow file: flows/<id>.yaml."""

    flow: Name = Field(..., description="Unique flow id; the file is flows/<id>.yaml.")
    version: int = Field(1, ge=1, lt=2**31, description="Bump on any change of behaviour.")
    description: str | None = Field(None, description="What the flow does.")
    inputs: dict[Name, TypeSpec] = Field(
        default_factory=empty_dict, description="The run's read-only inputs."
    )
    outputs: list[Name] | dict[Name, FlowOutput | None] = Field(
        default_factory=empty_list,
        description="Context keys returned as the run's result: a list of required "
        "keys, or a mapping key -> {optional, default, description} (an "
        "empty value: required).",
    )
    output_dir: str | None = Field(
        None,
        description="Folder the file tools of a run write to, relative to the yard (default: the run's "
        "workspace, .blockyard/workspaces/<run>/).",
    )
    memory: MemoryScope | None = Field(None, description="Long-term memory across runs.")
    schedule: ScheduleSpec | None = Field(None, description="Cron schedule for `blockyard serve`.")
    max_steps: int | None = Field(
        None, ge=1, description="Override of the derived per-run step limit."
    )
    inline: bool = Field(
        True,
        description="false: the engine's runs give LangGraph one node and one checkpoint per step, as the "
        "standalone graph does, instead of running a chain of steps inside one node "
        '(docs/langgraph.md, "Inline steps"). Slower; the same results.',
    )
    durability: Durability | None = Field(
        None,
        description="How runs of the flow are checkpointed: sync (every step before the next; the "
        "default), async (while the next step runs), exit (when the run ends or pauses), none "
        "(no checkpoints: cannot pause or be resumed). Unset: blockyard.yaml's `durability`. "
        'A run\'s own choice wins; see docs/runtime.md, "Durability".',
    )
    trace: bool | None = Field(
        None,
        description="false: runs with durability none record no event trace (their runs row is still "
        "recorded). Unset: blockyard.yaml's `trace`.",
    )
    synchronous: Synchronous | None = Field(
        None,
        description="What the runs' commits survive: normal (a crash of the process: kill -9, OOM; "
        "the default) or full (also a power cut or a kernel panic: each commit waits for the disk). "
        'Unset: blockyard.yaml\'s `synchronous`. See docs/runtime.md, "The disk guarantee".',
    )
    budget: BudgetSpec | None = Field(
        None,
        description="What one run (and one thread turn, `per_turn`) may spend on model calls: tokens, "
        "cost_usd, model_calls, wall_time. Keys unset here come from blockyard.yaml's `budget`.",
    )
    tags: list[str] = Field(default_factory=empty_list, description="Labels.")
    steps: list[StepSpec] = Field(..., min_length=1, description="The steps, in default order.")

    def output(self, name: str) -> FlowOutput:
        """How flow output `name` is declared (required unless the mapping form says otherwise)."""
        if isinstance(self.outputs, dict):
            return self.outputs.get(name) or REQUIRED_OUTPUT
        return REQUIRED_OUTPUT


# The bodies and the actions' models name StepSpec before it exists: FlowSpec's build (above, complete at
# import) resolves them within its own schema; each is built alone only when first used alone
# (defer_build), so that the union of the steps is compiled once at import, not once per model.
