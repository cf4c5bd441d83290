"""What validate says about delegation: delegated steps leave the order, cycles are refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.definitions.project import load_project
from engine.validate.semantic import check_project

Yard = Callable[[dict[str, str]], Path]

AGENT = """
    block: {name}
    kind: agent
    inputs: {{topic: {{type: string}}}}
    outputs: {{note: {{type: string}}}}
    prompt: {{user: "{{{{ topic }}}}"}}
    {extra}
"""


def problems(root: Path) -> list[str]:
    return [
        f"{d.code} {d.message}" for d in check_project(load_project(root)) if d.severity == "error"
    ]


def test_a_step_cannot_wait_for_a_delegated_step(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blocks/boss.yaml": AGENT.format(name="boss", extra=""),
            "blocks/aide.yaml": AGENT.format(name="aide", extra=""),
            "flows/f.yaml": """
            flow: f
            inputs: {topic: {type: string}}
            steps:
              - {id: lead, uses: boss, delegates: [helper]}
              - {id: helper, uses: aide}
              - {id: after, uses: aide, needs: [helper]}
        """,
        }
    )
    assert problems(root) == [
        "BY213 step 'after' names step 'helper', which is in the delegates of step 'lead'; steps in the flow can only "
        "go to steps of the same list (or `end`)"
    ]


def test_cycles_through_subflows_and_flow_delegates_are_found(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blocks/boss.yaml": AGENT.format(name="boss", extra=""),
            "flows/outer.yaml": """
            flow: outer
            inputs: {topic: {type: string}}
            steps:
              - {id: lead, uses: boss, delegates: [inner]}
        """,
            "flows/inner.yaml": """
            flow: inner
            inputs: {topic: {type: string}}
            steps:
              - {id: call, flow: outer, with: {topic: "{{ inputs.topic }}"}}
        """,
        }
    )
    assert problems(root) == [
        "BY320 step 'lead': delegating to flow 'inner' goes round in a cycle (step 'lead' of flow 'outer' -> flow "
        "'inner' -> flow 'outer' -> step 'lead' of flow 'outer'); an agent must not end up calling itself"
    ]


def test_delegates_without_a_cycle_are_fine(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blocks/boss.yaml": AGENT.format(name="boss", extra="delegates: [aide]"),
            "blocks/aide.yaml": AGENT.format(name="aide", extra=""),
            "flows/f.yaml": """
            flow: f
            inputs: {topic: {type: string}}
            outputs: [note]
            steps:
              - {id: lead, uses: boss, delegates: [helper, g]}
              - {id: helper, uses: aide}
        """,
            "flows/g.yaml": """
            flow: g
            inputs: {topic: {type: string}}
            steps:
              - {id: work, uses: aide}
        """,
        }
    )
    assert problems(root) == []
