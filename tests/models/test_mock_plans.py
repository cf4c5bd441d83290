"""The mock's TaskPlans (engine/models/mock_plans.py): the blocks whose words the intent shares, in a
runnable order, inputs mapped from earlier outputs or the intent, simple schedule phrases, the blocks
a repair round blames left out; the same request always gets the same plan."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.models.base import StructuredRequest
from engine.models.errors import ModelOutputError
from engine.models.mock_plans import compose_plan, parse_schedule
from engine.models.providers.mock import MockGenerator
from engine.models.structured import StructuredClient
from engine.spec import ModelProfile
from engine.spec.interchange import TaskPlan


def entry(
    block: str,
    description: str,
    *,
    kind: str = "transform",
    inputs: dict[str, Any] | None = None,
    outputs: dict[str, Any] | None = None,
    tags: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "block": block,
        "kind": kind,
        "description": description,
        "category": None,
        "tags": tags or [],
        "inputs": inputs or {},
        "outputs": outputs or {},
    }


CATALOG = [
    entry(
        "report",
        "Write a report from research queries.",
        inputs={
            "queries": {"type": "array", "required": True},
            "topic": {"type": "string", "required": True},
        },
        outputs={"report": {"type": "string"}},
    ),
    entry(
        "plan_queries",
        "Plan research queries for a topic.",
        inputs={"topic": {"type": "string", "required": True}},
        outputs={"queries": {"type": "array"}},
    ),
    entry("judge", "Decide whether the research report is good.", kind="decide"),
    entry("count", "Count research items.", inputs={"items": {"type": "array", "required": True}}),
    entry("greet", "Greet someone.", inputs={"name": {"type": "string", "required": True}}),
]


@pytest.mark.parametrize(
    ("intent", "cron", "said"),
    [
        ("order my lunch every Tuesday at 1pm", "0 13 * * TUE", "every Tuesday at 1pm"),
        ("water the plants on Fridays at 7:30am", "30 7 * * FRI", "on Fridays at 7:30am"),
        ("send the digest daily at 18:05", "5 18 * * *", "daily at 18:05"),
        ("check the queue every weekday at noon", "0 12 * * 1-5", "every weekday at noon"),
        ("back up every Sunday", "0 0 * * SUN", "every Sunday"),
        ("poll the feed every hour", "0 * * * *", "every hour"),
    ],
)
def test_simple_schedule_phrases(intent: str, cron: str, said: str) -> None:
    schedule, rest = parse_schedule(intent)
    assert schedule == {"cron_expression": cron, "timezone": "UTC", "human_readable": said}
    assert said not in rest


@pytest.mark.parametrize(
    "intent", ["summarize this text", "remind me every day at 25pm", "call at 3pm"]
)
def test_no_schedule_where_no_simple_phrase_says_one(intent: str) -> None:
    assert parse_schedule(intent) == (None, intent)


def test_the_plan_chains_the_matching_blocks_producers_first() -> None:
    plan = compose_plan(
        {"intent": "research a topic and write the report every Monday at 9am", "catalog": CATALOG}
    )
    TaskPlan.model_validate(plan)
    steps = {s["step_id"]: s for s in plan["steps"]}
    # the decide block needs branches and `count` an array nothing makes: left out; `greet` shares no word
    assert [s["block_id"] for s in plan["steps"]] == ["plan_queries", "report"]
    assert plan["entry_step_id"] == "plan_queries" and steps["report"]["depends_on"] == [
        "plan_queries"
    ]
    assert steps["report"]["input_mappings"] == {
        "queries": "{{ context.queries }}",
        "topic": "{{ inputs.intent }}",
    }
    assert (
        plan["inputs"]["intent"]["default"]
        == "research a topic and write the report every Monday at 9am"
    )
    assert plan["schedule"]["cron_expression"] == "0 9 * * MON"
    assert (
        compose_plan(
            {
                "intent": "research a topic and write the report every Monday at 9am",
                "catalog": CATALOG,
            }
        )
        == plan
    )


def test_a_repair_round_leaves_out_the_blocks_the_problems_point_at() -> None:
    first = compose_plan({"intent": "research a topic", "catalog": CATALOG})
    again = compose_plan(
        {
            "intent": "research a topic",
            "catalog": CATALOG,
            "previous_plan": first,
            "problems": ["BY210 steps[0].block_id: something about plan_queries"],
        }
    )
    assert [s["block_id"] for s in first["steps"]] == ["plan_queries", "report"]
    # without plan_queries nothing makes `queries`, so `report` cannot be placed either
    assert [s["block_id"] for s in again["steps"]] == ["greet"]


def test_the_mock_answers_a_compose_request_with_a_valid_plan() -> None:
    schema = TaskPlan.model_json_schema()
    request = StructuredRequest(
        flow="compose",
        step="plan",
        block="compose",
        system=None,
        user="greet Ada",
        output_schema=schema,
        inputs={"intent": "greet Ada", "catalog": CATALOG},
        purpose="compose",
    )
    model = StructuredClient(MockGenerator(ModelProfile(provider="mock")))
    plan = asyncio.run(model.structured(request))
    assert [s["block_id"] for s in plan["steps"]] == ["greet"]
    # a block's request with the same schema is not a compose request: the values the mock fabricates
    # for a schema (names that are no names) do not make a plan
    block = StructuredRequest(
        flow="f",
        step="s",
        block="b",
        system=None,
        user=None,
        output_schema=schema,
        inputs={"intent": "greet Ada", "catalog": CATALOG},
    )
    with pytest.raises(ModelOutputError, match="does not match its outputs, even after a retry"):
        asyncio.run(model.structured(block))
