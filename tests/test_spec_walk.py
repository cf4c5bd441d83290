"""The one walk over a flow's step tree (engine/spec/walk.py), which the validator, pinning, the
closure of a flow, the catalog and the compiler all use."""

from __future__ import annotations

from engine.spec import FlowSpec
from engine.spec.flow import parse_step
from engine.spec.walk import delegated_ids, step_lists, walk_steps

FLOW = FlowSpec.model_validate(
    {
        "flow": "f",
        "steps": [
            {"id": "a", "uses": "x"},
            {
                "id": "outer",
                "loop": {
                    "max_iterations": 2,
                    "steps": [
                        {"id": "b", "uses": "x"},
                        {
                            "id": "each",
                            "foreach": {
                                "items": "[1]",
                                "as": "item",
                                "steps": [{"id": "c", "uses": "x"}],
                            },
                        },
                    ],
                },
            },
            {"id": "fan", "map": {"items": "[1]", "as": "row", "uses": "x"}},
            {
                "id": "body",
                "map": {"items": "[1]", "as": "row", "steps": [{"id": "d", "uses": "x"}]},
            },
        ],
    }
)


def test_every_step_in_document_order_with_its_path() -> None:
    assert [(w.step.id, w.path, w.position) for w in walk_steps(FLOW.steps)] == [
        ("a", ("steps", 0), 0),
        ("outer", ("steps", 1), 1),
        ("b", ("steps", 1, "loop", "steps", 0), 0),
        ("each", ("steps", 1, "loop", "steps", 1), 1),
        ("c", ("steps", 1, "loop", "steps", 1, "foreach", "steps", 0), 0),
        ("fan", ("steps", 2), 2),
        ("body", ("steps", 3), 3),
        ("d", ("steps", 3, "map", "steps", 0), 0),
    ]


def test_each_list_knows_its_owner_parent_and_the_names_it_sees() -> None:
    lists = list(step_lists(FLOW.steps))
    assert [(s.kind, s.owner.id if s.owner else None, s.path, s.items) for s in lists] == [
        ("flow", None, ("steps",), ()),
        ("loop", "outer", ("steps", 1, "loop", "steps"), ()),
        ("foreach", "each", ("steps", 1, "loop", "steps", 1, "foreach", "steps"), ("item",)),
        ("map", "body", ("steps", 3, "map", "steps"), ("row",)),
    ]
    walked = {w.step.id: w for w in walk_steps(FLOW.steps)}
    assert walked["c"].list.parent is walked["each"].list
    assert walked["each"].bodies == (walked["c"].list,)
    assert walked["fan"].bodies == ()  # a map of a block has no body


def test_a_step_with_several_bodies_has_each_walked() -> None:
    step = parse_step(
        {
            "id": "both",
            "loop": {"max_iterations": 1, "steps": [{"id": "l", "uses": "x"}]},
            "foreach": {"items": "[1]", "steps": [{"id": "f", "uses": "x"}]},
        }
    )
    assert [w.step.id for w in walk_steps([step])] == ["both", "l", "f"]


def test_delegated_steps_are_agent_steps_another_agent_step_of_the_list_names() -> None:
    steps = [
        parse_step(s)
        for s in (
            {"id": "lead", "uses": "agent", "delegates": ["aide", "plain", "lead", "elsewhere"]},
            {"id": "aide", "uses": "agent", "delegates": ["helper"]},
            {"id": "helper", "uses": "agent"},
            {"id": "plain", "uses": "tool"},
        )
    ]
    assert delegated_ids(steps, lambda step: step.uses == "agent") == {"aide", "helper"}
    assert delegated_ids(steps[2:], lambda step: True) == set()
