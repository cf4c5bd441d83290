"""Following delegation (engine/spec/delegation.py): the one computation the validator judges
delegation with (BY320 cycles, BY440 depth) and the compiler builds delegates from, trusting it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.compile import compile_flow
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from engine.nodes.errors import InternalError
from engine.spec import AgentBlock, BlockSpec, FlowSpec, parse_block
from engine.spec.block import MAX_DELEGATION_DEPTH
from engine.spec.delegation import Agent, Catalog, Depth, block_callees
from engine.spec.flow import parse_step
from engine.validate.semantic import check_project

Yard = Callable[[dict[str, str]], Path]


def agent(name: str, delegates: list[str] | None = None) -> AgentBlock:
    return AgentBlock.model_validate(
        {
            "block": name,
            "kind": "agent",
            "outputs": {"answer": {"type": "string"}},
            "prompt": {"user": "hi"},
            "delegates": delegates or [],
        }
    )


def agent_yaml(name: str, delegates: str = "") -> str:
    return (
        f"block: {name}\nkind: agent\ninputs: {{task: {{type: string, default: ''}}}}\n"
        f"outputs: {{answer: {{type: string}}}}\nprompt: {{user: '{{{{ task }}}}'}}\n"
        + (f"delegates: [{delegates}]\n" if delegates else "")
    )


AGENTS = {
    "lead": agent("lead", ["both", "helper", "nowhere"]),
    "both": agent("both"),
    "helper": agent("helper"),
}
BLOCKS: dict[str, BlockSpec] = {
    **AGENTS,
    "tool": parse_block(
        {"block": "tool", "kind": "tool", "tool": "x", "outputs": {"y": {"type": "string"}}}
    ),
}
FLOWS = {
    "both": FlowSpec.model_validate({"flow": "both", "steps": [{"id": "s", "uses": "helper"}]}),
    "tool": FlowSpec.model_validate({"flow": "tool", "steps": [{"id": "s", "uses": "helper"}]}),
}
CATALOG = Catalog(BLOCKS.get, FLOWS.get)


def test_a_block_delegate_is_an_agent_block_first_then_a_flow() -> None:
    found = [
        (c.name, c.position, c.of, c.kind)
        for c in block_callees(agent("x", ["both", "tool", "nowhere"]), CATALOG)
    ]
    # "both" is an agent block and a flow: the agent; "tool" is a block but no agent: the flow
    assert found == [
        ("both", 0, "block", "agent"),
        ("tool", 1, "block", "flow"),
        ("nowhere", 2, "block", None),
    ]


def test_a_step_offers_its_delegates_then_its_blocks() -> None:
    sibling = parse_step({"id": "helper", "uses": "helper"})
    step = parse_step({"id": "s", "uses": "lead", "delegates": ["helper", "both", "lost"]})
    me = Agent(AGENTS["lead"], "f", step, {"helper": sibling})

    # its own delegates make it another agent than its block
    assert me.key == "step 's' of flow 'f'"
    found = [(c.name, c.of, c.kind) for c in me.callees(CATALOG)]
    assert found == [
        ("helper", "step", "step"),
        ("both", "step", "flow"),
        ("lost", "step", None),
        ("both", "block", "agent"),
        ("helper", "block", "agent"),
        ("nowhere", "block", None),
    ]
    (first, *_) = me.callees(CATALOG)
    assert me.inner(first) == Agent(AGENTS["helper"], "f", sibling, {"helper": sibling})
    assert me.inner(first).key == "agent block 'helper'"  # no delegates of its own: its block


def test_each_agent_and_each_delegated_flow_is_a_level_and_a_cycle_none() -> None:
    blocks = {
        "lead": agent("lead", ["inner"]),
        "a": agent("a", ["b"]),
        "b": agent("b"),
        "helper": agent("helper"),
        "loop": agent("loop", ["loop"]),
    }
    flows = {
        "inner": FlowSpec.model_validate(
            {
                "flow": "inner",
                "steps": [
                    {"id": "x", "uses": "helper", "delegates": ["y"]},
                    {"id": "y", "uses": "a"},
                ],
            }
        ),
        "f": FlowSpec.model_validate(
            {
                "flow": "f",
                "steps": [
                    {"id": "s", "uses": "lead"},
                    {"id": "sub", "flow": "inner"},
                    {"id": "again", "uses": "loop"},
                ],
            }
        ),
    }
    depth = Depth(Catalog(blocks.get, flows.get))

    assert [
        (position, step.id, chain) for position, step, chain in depth.chains("f", flows["f"].steps)
    ] == [
        (
            0,
            "s",
            (
                "agent block 'lead'",
                "flow 'inner'",
                "step 'x' of flow 'inner'",
                "agent block 'a'",
                "agent block 'b'",
            ),
        ),
        (
            1,
            "sub",
            ("step 'x' of flow 'inner'", "agent block 'a'", "agent block 'b'"),
        ),  # a subflow: no level
        (2, "again", ("agent block 'loop'",)),  # its cycle is BY320's: it adds no depth
    ]


def test_depth_is_the_validators_rule_alone(make_yard: Yard) -> None:
    deepest = MAX_DELEGATION_DEPTH + 1
    blocks = {
        f"blocks/a{i}.yaml": agent_yaml(f"a{i}", f"a{i + 1}" if i + 1 < deepest else "")
        for i in range(deepest)
    }
    root = make_yard({**blocks, "flows/f.yaml": "flow: f\nsteps:\n  - {id: s, uses: a0}\n"})
    project = load_project(root)

    assert [d.code for d in check_project(project)] == ["BY440"]
    # handed over unvalidated: the compiler trusts, builds it
    compiled = compile_flow(make_bundle(project, "f"))
    assert "s" in compiled.graph.nodes


def test_a_cycle_that_reaches_the_compiler_is_a_bug_not_a_hang(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blocks/a.yaml": agent_yaml("a", "b"),
            "blocks/b.yaml": agent_yaml("b", "a"),
            "flows/f.yaml": "flow: f\nsteps:\n  - {id: s, uses: a}\n",
        }
    )
    project = load_project(root)
    assert {d.code for d in check_project(project)} == {"BY320"}
    with pytest.raises(InternalError, match="bug: the validator should have refused") as caught:
        compile_flow(make_bundle(project, "f"))
    assert str(caught.value) == (
        "bug: the validator should have refused flow 'f', agent 's.b.a': delegation that "
        "goes round in a cycle (agent block 'a' -> agent block 'b' -> agent block 'a') "
        "(BY320)"
    )
