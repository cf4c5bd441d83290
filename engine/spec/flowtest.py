"""The format of flow test files (`flows/*.test.yaml`, run by `blockyard test`: engine/cli/flowtests.py);
its JSON Schema is published with the others (engine/spec/export.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from engine.core.values import JsonDict
from engine.spec.common import Name, Spec, empty_dict, empty_list


class Decision(Spec):
    """One approval decision, applied when the run waits."""

    approve: bool = Field(..., description="Approve (true) or reject (false) the waiting gate.")
    values: JsonDict = Field(default_factory=empty_dict, description="Gate field values.")
    reason: str | None = Field(None, description="Why, recorded in the trace.")
    gate: str | None = Field(None, description="Which gate, when several wait.")
    actor: str | None = Field(None, alias="as", description="Who decides.")


class Expect(Spec):
    """What the run must end with."""

    status: Literal["finished", "failed", "waiting"] = Field(
        "finished", description="Final status."
    )
    outputs: JsonDict = Field(
        default_factory=empty_dict, description="Outputs that must equal these values."
    )
    error: str | None = Field(None, description="Text the error must contain (failed runs).")
    absent: list[str] = Field(
        default_factory=empty_list,
        description="Outputs the run must end without (optional outputs it never wrote).",
    )
    warnings: list[str] = Field(
        default_factory=empty_list,
        description="Texts that must each be in the message of one of the run's warning "
        "events (a loop out of iterations, a visit bound used up).",
    )
    files: dict[str, str] = Field(
        default_factory=empty_dict,
        description="Files the run must have written (paths relative to its output folder) "
        "and a text each must contain at the end of the run.",
    )


class Turn(Spec):
    """One turn of a conversation thread: a run of the flow that is sent the turns before it."""

    inputs: JsonDict = Field(
        default_factory=empty_dict, description="The turn's inputs (its `message`)."
    )
    decisions: list[Decision] = Field(
        default_factory=empty_list, description="Approval decisions, in order."
    )
    expect: Expect = Field(default_factory=Expect, description="The expected end of the turn.")


class FlowTest(Spec):
    name: str = Field(..., description="What the test shows.")
    inputs: JsonDict = Field(default_factory=empty_dict, description="The run's inputs.")
    replies: dict[str, list[Any]] = Field(
        default_factory=empty_dict,
        description="Scripted model replies by `flow.step`, step or block id "
        "(for every turn, each starting from the first reply).",
    )
    decisions: list[Decision] = Field(
        default_factory=empty_list, description="Approval decisions, in order."
    )
    expect: Expect = Field(default_factory=Expect, description="The expected end of the run.")
    turns: list[Turn] = Field(
        default_factory=empty_list,
        description="Instead of one run: the turns of one new conversation thread, in order.",
    )

    @model_validator(mode="after")
    def _one_run_or_turns(self) -> FlowTest:
        if self.turns and ({"inputs", "decisions", "expect"} & self.model_fields_set):
            raise ValueError(
                "a test with `turns` gives each turn its own inputs, decisions and expect"
            )
        return self


class SuiteFile(Spec):
    flow: Name = Field(..., description="The flow under test.")
    tests: list[FlowTest] = Field(..., min_length=1, description="The tests.")
