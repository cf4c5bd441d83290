"""A flow offered to an agent as a tool runs exactly as it runs alone: on the run's context (models,
memory, tools), whatever model-calling blocks it holds. On the offline mock, through the runtime."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import Event
from tests.agents.agent_kit import run_flow

Yard = Callable[[dict[str, str]], Path]

BLOCKS = {
    "blocks/boss.yaml": """
        block: boss
        kind: agent
        description: Hands work out.
        inputs: {task: {type: string}}
        outputs: {answer: {type: string}}
        prompt: {user: "{{ task }}"}
    """,
    "blocks/summ.yaml": """
        block: summ
        kind: llm
        description: Summarize.
        inputs: {text: {type: string}}
        outputs: {summary: {type: string}}
        prompt: {user: "Summarize {{ text }} (known: {{ user_preferences }})"}
    """,
    "blocks/judge.yaml": """
        block: judge
        kind: decide
        description: Judge.
        inputs: {text: {type: string}}
        outputs: {verdict: {type: string, enum: [keep, drop]}}
        prompt: {user: "Keep {{ text }}?"}
    """,
    "blocks/brief.yaml": """
        block: brief
        kind: smart
        description: One line.
        inputs: {text: {type: string, description: The text.}}
        outputs: {tldr: {type: string, description: One line.}}
    """,
    "blocks/aide.yaml": """
        block: aide
        kind: agent
        description: Helps.
        inputs: {text: {type: string}}
        outputs: {help: {type: string}}
        prompt: {user: "Help with {{ text }}"}
        tools: [current_time]
    """,
}

# Per kind: the inner flow's steps and outputs. Memory is the run's scope (the outer flow's when delegated).
INNER = """
    flow: inner
    description: Looks at a text.
    inputs: {text: {type: string}}
    outputs: [OUTPUTS]
    memory: {scope: team/demo}
    steps:
"""
KINDS = {
    "llm": ("summary", ["{id: sum_up, uses: summ}"]),
    "decide": ("verdict", ["{id: verdict_step, uses: judge}"]),
    "smart": ("tldr", ["{id: shorten, uses: brief}"]),
    "agent": ("help", ["{id: assist, uses: aide}"]),
    "memory": (
        "memories",
        [
            '{id: remember, uses: save_to_memory, with: {memory_key: topic, memory_value: "{{ '
            'inputs.text }}"}}',
            "{id: recall, uses: query_memory}",
        ],
    ),
}


def _inner(*kinds: str) -> str:
    outputs = ", ".join(KINDS[kind][0] for kind in kinds)
    steps = "".join(f"      - {step}\n" for kind in kinds for step in KINDS[kind][1])
    return INNER.replace("OUTPUTS", outputs) + steps


def _yard(make_yard: Yard, *kinds: str) -> Path:
    return make_yard(
        {
            "blockyard.yaml": "models:\n  default:\n    provider: mock\n"
            "    replies: {lead: [{$tool_calls: [{name: inner, args: {text: bees}}]}, done]}\n",
            **BLOCKS,
            "flows/inner.yaml": _inner(*kinds),
            "flows/outer.yaml": """
            flow: outer
            outputs: [answer]
            memory: {scope: team/demo}
            steps:
              - {id: lead, uses: boss, with: {task: look into bees}, delegates: [inner]}
        """,
        }
    )


def _delegated(root: Path) -> tuple[dict[str, Any] | None, list[Event]]:
    done = run_flow(root, "outer", env={})
    assert done.outputs == {"answer": "done"}, done.error
    ended = [call for call in done.tool_calls("lead") if call["status"] != "started"]
    assert len(ended) == 1
    return (ended[0].get("result"), done.of("step_failed"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_delegated_flow_gives_what_it_gives_alone(make_yard: Yard, kind: str) -> None:
    root = _yard(make_yard, kind)
    alone = run_flow(root, "inner", {"text": "bees"}, env={})
    assert alone.outputs is not None, alone.error

    result, failures = _delegated(root)

    assert failures == []
    assert result == alone.outputs
    if kind == "memory":
        assert result == {"memories": {"topic": "bees"}}


def test_a_delegated_flow_of_every_kind_runs_its_steps_under_the_agent(make_yard: Yard) -> None:
    root = _yard(make_yard, *KINDS)
    alone = run_flow(root, "inner", {"text": "bees"}, env={})
    done = run_flow(root, "outer", env={})

    ended = [call for call in done.tool_calls("lead") if call["status"] != "started"]
    assert [call["status"] for call in ended] == ["ok"] and ended[0]["result"] == alone.outputs
    steps = [step.split(",")[0].removeprefix("{id: ") for kind in KINDS for step in KINDS[kind][1]]
    assert [e.step for e in done.of("step_finished")] == [
        *(f"lead.inner.{step}" for step in steps),
        "lead.inner",
        "lead",
    ]
