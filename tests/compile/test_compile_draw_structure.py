"""The drawings' graphs, checked against the flows they draw (beside the text snapshots of
test_compile_draw.py): the Mermaid and DOT output are parsed back into nodes and edges, the two must
agree, and both must be the wiring this file works out from the flow's YAML on its own — its steps in
order, `needs:`, a router's routes and default, a gate's branches, `on_max_visits`, and the bodies of
loops, foreach and map. A snapshot rewritten from a wrong drawing (BLOCKYARD_UPDATE_SNAPSHOTS=1) is
caught here, whatever the text says."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.compile import CompiledFlow
from engine.compile.draw import draw
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from tests.compile.test_compile_draw import CHILD, DAG, EVERYTHING, SNAPSHOTS

START, END = "__start__", "__end__"
Edge = tuple[str, str]


@dataclass
class Graph:
    nodes: set[str] = field(default_factory=set)
    edges: set[Edge] = field(default_factory=set)


# ---- the drawings, parsed ------------------------------------------------------------------------

_MERMAID_NODE = re.compile(r"^\s*(\w+)\s*(\(\[|\[\[|\[/|\{\{|\(\(|\[|\{)")
_MERMAID_EDGE = re.compile(r"^\s*(\w+)\s+(?:-->|-\.->)(?:\|\"[^\"]*\"\|)?\s+(\w+)\s*$")
_DOT_NODE = re.compile(r'^\s*"(\w+)"\s*\[label=')
_DOT_EDGE = re.compile(r'^\s*"(\w+)"\s*->\s*"(\w+)"')


def parse_mermaid(text: str) -> Graph:
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    graph = Graph()
    for line in lines[1:]:
        if line.strip() == "end" or line.strip().startswith("subgraph "):
            continue
        edge = _MERMAID_EDGE.match(line)
        node = _MERMAID_NODE.match(line)
        assert edge or node, f"not a node nor an edge: {line!r}"
        if edge:
            graph.edges.add((edge[1], edge[2]))
        elif node:
            graph.nodes.add(node[1])
    return graph


def parse_dot(text: str) -> Graph:
    graph = Graph()
    for line in text.splitlines():
        edge, node = _DOT_EDGE.match(line), _DOT_NODE.match(line)
        if edge:
            graph.edges.add((edge[1], edge[2]))
        elif node:
            graph.nodes.add(node[1])
    return graph


# ---- the wiring, from the YAML alone -------------------------------------------------------------


def wiring(flow_yaml: str) -> Graph:
    """The nodes and edges a drawing of this flow must have, worked out from its steps (docs/flows.md):
    a step goes on to the next one in the list (the last to the end) unless it is a router; `needs:`
    makes a step start after the steps it names instead; a router goes to its routes' and its default's
    steps; a gate (`branches:`) to its yes/no steps, and on to the next step otherwise; `on_max_visits`
    leaves a step to the step it names; a loop runs its steps then its check, which goes back to the
    first or on; a foreach goes to its steps and back, then on; a map of steps fans out to its steps and
    joins them, then goes on."""
    steps: list[dict[str, Any]] = yaml.safe_load(textwrap.dedent(flow_yaml))["steps"]
    graph = Graph(nodes={START, END})
    has_needs = any("needs" in step for step in steps)
    graph.edges.add((START, _entry(steps, str(steps[0]["id"]))))
    for index, step in enumerate(steps):
        _draw_step(graph, step)
        _wire_start(graph, steps, index, has_needs)
        _wire_leaving(graph, steps, index, has_needs)
    if has_needs:  # the steps nothing goes on from end the flow
        for step in steps:
            if not any(a == _exit_of(step) for a, _ in graph.edges):
                graph.edges.add((_exit_of(step), END))
    return graph


def _entry(steps: list[dict[str, Any]], step_id: str) -> str:
    """The node a step is entered by: a loop's first inner step, else the step itself."""
    step = next(step for step in steps if step["id"] == step_id)
    return str(step["loop"]["steps"][0]["id"]) if "loop" in step else step_id


def _exit_of(step: dict[str, Any]) -> str:
    """The node a step is left from: a loop's check, a map of steps' join, else the step itself."""
    if "loop" in step:
        return f"{step['id']}__check"
    if "map" in step and "steps" in step["map"]:
        return f"{step['id']}__join"
    return str(step["id"])


def _body(graph: Graph, first: str, inner: list[dict[str, Any]], last: str) -> None:
    """`first` -> the inner steps in order -> `last`."""
    names = [str(s["id"]) for s in inner]
    graph.nodes.update(names)
    for a, b in zip([first, *names], [*names, last], strict=True):
        graph.edges.add((a, b))


def _draw_step(graph: Graph, step: dict[str, Any]) -> None:
    """A step's own nodes, and the edges inside a loop, foreach or map body."""
    sid = str(step["id"])
    if "loop" in step:
        check = f"{sid}__check"
        graph.nodes.add(check)
        names = [str(s["id"]) for s in step["loop"]["steps"]]
        graph.nodes.update(names)
        for a, b in zip(names, [*names[1:], check], strict=True):
            graph.edges.add((a, b))
        graph.edges.add((check, names[0]))
    elif "foreach" in step:
        graph.nodes.add(sid)
        _body(graph, sid, step["foreach"]["steps"], sid)
    elif "map" in step and "steps" in step["map"]:
        graph.nodes.update({sid, f"{sid}__join"})
        _body(graph, sid, step["map"]["steps"], f"{sid}__join")
    else:
        graph.nodes.add(sid)


def _wire_start(graph: Graph, steps: list[dict[str, Any]], index: int, has_needs: bool) -> None:
    """In a flow with `needs:`, the edges into a step: from the steps it needs, else from the step before it."""
    step, sid = steps[index], str(steps[index]["id"])
    if "needs" in step:
        for need in step["needs"]:
            need_step = next(other for other in steps if other["id"] == need)
            graph.edges.add((_exit_of(need_step), _entry(steps, sid)))
    elif has_needs and index > 0:
        # a step without needs: after the step before it, as in any flow
        graph.edges.add((_exit_of(steps[index - 1]), _entry(steps, sid)))


def _wire_leaving(graph: Graph, steps: list[dict[str, Any]], index: int, has_needs: bool) -> None:
    """The edges out of a step: a router's routes and default (and nothing else), a gate's branches,
    `on_max_visits`, and on to the next step (the last to the end) in a flow without `needs:`."""
    step, sid = steps[index], str(steps[index]["id"])
    if "router" in step:
        router = step["router"]
        for target in [*(route["goto"] for route in router["routes"]), router["default"]]:
            graph.edges.add((sid, _entry(steps, target)))
        return
    if "branches" in step:
        for target in step["branches"].values():
            graph.edges.add((sid, _entry(steps, target)))
    if "on_max_visits" in step:
        graph.edges.add((sid, _entry(steps, step["on_max_visits"])))
    if not has_needs:
        following = _entry(steps, str(steps[index + 1]["id"])) if index + 1 < len(steps) else END
        graph.edges.add((_exit_of(step), following))


# ---- the checks ----------------------------------------------------------------------------------


def assert_drawn(compiled: CompiledFlow, flow_yaml: str) -> None:
    mermaid, dot = parse_mermaid(compiled.mermaid()), parse_dot(compiled.dot())
    expected = wiring(flow_yaml)
    assert mermaid.nodes == dot.nodes and mermaid.edges == dot.edges, "the two drawings disagree"
    assert mermaid.nodes == expected.nodes, (
        sorted(mermaid.nodes - expected.nodes),
        sorted(expected.nodes - mermaid.nodes),
    )
    assert mermaid.edges == expected.edges, (
        sorted(mermaid.edges - expected.edges),
        sorted(expected.edges - mermaid.edges),
    )


@pytest.mark.parametrize("flow", [EVERYTHING, DAG], ids=["everything", "dag"])
def test_the_drawings_have_the_flows_wiring(build: Callable[..., CompiledFlow], flow: str) -> None:
    assert_drawn(build(flow, subflows={"child": CHILD}), flow)


@pytest.mark.parametrize("name", ["everything", "dag"])
def test_the_snapshots_have_the_flows_wiring(name: str) -> None:
    # the stored text too: a snapshot rewritten from a drawing that lost an edge fails here
    flow = {"everything": EVERYTHING, "dag": DAG}[name]
    expected = wiring(flow)
    for drawn in (
        parse_mermaid((SNAPSHOTS / f"{name}.mmd").read_text(encoding="utf-8")),
        parse_dot((SNAPSHOTS / f"{name}.dot").read_text(encoding="utf-8")),
    ):
        assert (drawn.nodes, drawn.edges) == (expected.nodes, expected.edges)


def test_the_example_flow_is_drawn_as_its_steps_in_order(repo_root: Path) -> None:
    text = (repo_root / "flows" / "hello.yaml").read_text(encoding="utf-8")
    drawn = parse_mermaid(draw(make_bundle(load_project(repo_root), "hello"), "mermaid"))
    expected = wiring(text)
    assert (drawn.nodes, drawn.edges) == (expected.nodes, expected.edges)
    assert expected.edges == {
        (START, "greet"),
        ("greet", "shout"),
        ("shout", END),
    }  # the model itself, checked
    stored = parse_mermaid((SNAPSHOTS / "hello.mmd").read_text(encoding="utf-8"))
    assert (stored.nodes, stored.edges) == (expected.nodes, expected.edges)


def test_the_wiring_model_knows_a_dag_by_hand() -> None:
    # the model above, checked on the DAG against edges written out by hand: `b2` has no needs, so it
    # follows `b1`, the step before it; `join` waits for `b2` and `c`
    assert wiring(DAG).edges == {
        (START, "a"),
        ("a", "b1"),
        ("a", "c"),
        ("b1", "b2"),
        ("b2", "join"),
        ("c", "join"),
        ("join", END),
    }


def test_a_wrong_drawing_is_caught() -> None:
    # the parsers see a lost edge and a wrong target, so the checks above can fail
    right = (SNAPSHOTS / "dag.mmd").read_text(encoding="utf-8")
    expected = wiring(DAG)
    assert parse_mermaid(right).edges == expected.edges
    assert parse_mermaid(right.replace("    a --> c\n", "")).edges != expected.edges
    assert parse_mermaid(right.replace("b2 --> join", "b2 --> c")).edges != expected.edges
