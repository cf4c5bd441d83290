"""The formats other tools hand Blockyard: a TaskPlan (docs/taskplans.md) and a React Flow graph
(docs/reactflow.md). Their JSON Schemas (schemas/taskplan.schema.json, schemas/reactflow.schema.json)
are generated from these models; engine/interchange/ converts them to flows."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core.values import JsonDict
from engine.spec.common import Name, Spec, TypeSpec, empty_dict, empty_list
from engine.spec.flow import ApprovalSpec, MemoryScope, Misfire, ScheduleSpec

_SCHEDULE = ScheduleSpec.model_fields


class PlanSchedule(Spec):
    """When the plan's flow runs by itself (`schedule:` of the flow it becomes: `cron_expression` is its
    `cron`, every other key as in a flow file)."""

    cron_expression: str = Field(
        ..., description="Cron expression: five fields or a macro such as @daily."
    )
    timezone: str = Field("UTC", description="IANA time zone, e.g. Europe/Paris.")
    inputs: JsonDict = Field(
        default_factory=empty_dict,
        description="Inputs of scheduled runs (every required input of the plan).",
    )
    misfire: Misfire = Field(
        _SCHEDULE["misfire"].default, description=_SCHEDULE["misfire"].description
    )
    human_readable: str | None = Field(
        None, description="The schedule in words, e.g. every Tuesday at 1pm."
    )


class PlanStep(Spec):
    """One step of a plan: a block of the yard, run after the steps it depends on."""

    step_id: Name = Field(..., description="Unique id of the step (the flow's step id).")
    block_id: str = Field(..., description="The block it runs: `id` or `id@version`.")
    depends_on: list[Name] = Field(
        default_factory=empty_list,
        description="Steps that must finish first; several run in parallel.",
    )
    branches: dict[str, Name] | None = Field(
        None, description="A decide block's outcome -> the step (or `end`) it leads to."
    )
    input_mappings: dict[Name, Any] = Field(
        default_factory=empty_dict,
        description='Block input -> a literal or a template, e.g. "{{ context.summary }}".',
    )
    require_approval: bool | ApprovalSpec = Field(
        False,
        description="Pause for a person's approval before the step runs (true, or the gate's settings).",
    )
    description: str | None = Field(None, description="What the step is for.")


class TaskPlan(Spec):
    """A TaskPlan: an ordered list of block references with dependencies and branches."""

    plan_id: Name = Field(..., description="The plan's id (the flow's name unless one is given).")
    user_intent: str = Field(..., description="What the user asked for (the flow's description).")
    entry_step_id: Name = Field(..., description="The step that runs first.")
    steps: list[PlanStep] = Field(..., min_length=1, description="The steps.")
    inputs: dict[Name, TypeSpec] | None = Field(
        None,
        description="The flow's inputs (default: every `inputs.NAME` the mappings read, of any type).",
    )
    memory: MemoryScope | None = Field(
        None,
        description="Long-term memory across runs, as a flow's `memory:` (needed by memory blocks and "
        "prompts that read memory).",
    )
    schedule: PlanSchedule | None = Field(
        None, description="Run on a cron schedule under `blockyard serve`."
    )


class _Open(BaseModel):
    """React Flow objects carry more than Blockyard reads (selection, sizes, styles): kept, ignored."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class GraphNode(_Open):
    """A React Flow node."""

    id: str = Field(..., min_length=1, description="Unique node id (the step id, made a name).")
    type: Literal[
        "agent",
        "tool",
        "smart_node",
        "router",
        "iterator",
        "block",
        "loop",
        "map",
        "approval",
        "subflow",
        "end",
    ] = Field(..., description="What the node is (docs/reactflow.md).")
    data: JsonDict = Field(
        default_factory=empty_dict, description="The node's settings; `isStart` marks the entry."
    )
    position: dict[str, float] | None = Field(
        None, description="Where the editor draws it: {x, y}."
    )


class GraphEdge(_Open):
    """A React Flow edge."""

    id: str | None = Field(None, description="Edge id (named in errors).")
    source: str = Field(..., description="The node it leaves.")
    target: str = Field(..., description="The node it reaches.")
    sourceHandle: str | None = Field(
        None,
        description="Which way out of the source: a router's route "
        "handle, NEXT/COMPLETE, branch-<value>, reject, ...",
    )
    targetHandle: str | None = Field(None, description="Ignored.")
    data: JsonDict | None = Field(
        None, description="`kind`: the edge's kind in Blockyard's graph model."
    )


class ReactFlowGraph(_Open):
    """A React Flow graph as editors save it, plus Blockyard's optional `flow` settings."""

    nodes: list[GraphNode] = Field(..., min_length=1, description="The nodes.")
    edges: list[GraphEdge] = Field(default_factory=empty_list, description="The edges.")
    flow: JsonDict | None = Field(
        None,
        description="The flow's own settings (id, inputs, outputs, ...), "
        "as in a flow file without `steps`.",
    )
