"""The graph model of a flow (engine/compile/flowgraph.py): nodes and edges with kinds, groups for
bodies, handles for the ways out of routers and decide steps — what the drawings, the server and
the web page read (the drawings themselves: test_compile_draw.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from engine.compile.draw import FORMATS, as_json, draw, mermaid
from engine.compile.flowgraph import FlowGraph, flow_graph
from engine.definitions.pinned import Bundle, make_bundle
from engine.definitions.project import load_project
from tests.compile.test_compile_draw import CHILD, DAG, EVERYTHING


def everything(bundle_of: Callable[..., Bundle]) -> FlowGraph:
    return flow_graph(bundle_of(EVERYTHING, subflows={"child": CHILD}))


def test_nodes_have_the_kind_of_what_they_stand_for(bundle_of: Callable[..., Bundle]) -> None:
    graph = everything(bundle_of)
    kinds = {node.id: (node.kind, node.step, node.group) for node in graph.nodes}
    assert kinds == {
        "__start__": ("start", None, None),
        "__end__": ("end", None, None),
        "triage": ("router", "triage", None),
        "fix": ("step", "fix", None),
        "qa": ("step", "qa", "review__cluster"),
        "apply": ("step", "apply", "review__cluster"),
        "review__check": ("loop", "review", "review__cluster"),
        "ask": ("decide", "ask", None),
        "totals": ("foreach", "totals", "totals__cluster"),
        "line": ("step", "line", "totals__cluster"),
        "implement": ("map", "implement", None),
        "drafts": ("map", "drafts", None),
        "draft": ("step", "draft", "drafts__body__cluster"),
        "check": ("step", "check", "drafts__body__cluster"),
        "drafts__join": ("join", None, None),
        "research": ("subflow", "research", None),
        "publish": ("step", "publish", None),
    }
    assert [(g.id, g.kind, g.step, g.parent) for g in graph.groups] == [
        ("review__cluster", "loop", "review", None),
        ("totals__cluster", "foreach", "totals", None),
        ("drafts__body__cluster", "map", "drafts", None),
    ]
    assert graph.node("fix").data == {"block": "mark", "kind": "transform", "max_visits": 3}
    assert graph.node("research").data == {"flow": "child"}
    assert graph.node("review__check").data == {"until": "context.qa_passed", "max_iterations": 15}


def test_edges_say_how_control_moves(bundle_of: Callable[..., Bundle]) -> None:
    graph = everything(bundle_of)
    edges = [(e.source, e.target, e.kind, e.label, e.handle, e.bound) for e in graph.edges]
    assert ("__start__", "triage", "next", None, None, None) in edges
    assert ("triage", "fix", "route", "regex ^err", "route-1", None) in edges
    assert ("triage", "publish", "route", "expr context.score > 0.8", "route-2", None) in edges
    assert ("triage", "qa", "default", "default", "default", None) in edges
    assert ("fix", "publish", "exit", "after 3 visits", None, 3) in edges
    assert ("review__check", "qa", "loop-back", "again", None, 15) in edges
    assert ("review__check", "ask", "next", "done", None, None) in edges
    assert ("ask", "publish", "branch", "yes", "branch-yes", None) in edges
    assert ("ask", "totals", "default", "other", "other", None) in edges
    assert ("totals", "line", "iterate", "next", None, None) in edges
    assert ("drafts", "draft", "fan-out", "each item", None, None) in edges
    assert ("check", "drafts__join", "join", None, None, None) in edges
    assert [e.id for e in graph.edges] == [f"e{n}" for n in range(len(graph.edges))]
    assert {e.kind for e in graph.edges if e.dashed} == {"exit"}


def test_routers_and_decide_steps_offer_a_handle_per_way_out(
    bundle_of: Callable[..., Bundle],
) -> None:
    graph = everything(bundle_of)
    assert [(h.id, h.label) for h in graph.node("triage").handles] == [
        ("route-1", "regex ^err"),
        ("route-2", "expr context.score > 0.8"),
        ("default", "default"),
    ]
    assert [(h.id, h.label) for h in graph.node("ask").handles] == [
        ("branch-yes", "yes"),
        ("branch-no", "no"),
        ("other", "other"),
    ]
    handles = {node.id: {h.id for h in node.handles} for node in graph.nodes}
    for edge in graph.edges:
        assert edge.handle is None or edge.handle in handles[edge.source]


def test_barriers_are_join_edges(bundle_of: Callable[..., Bundle]) -> None:
    graph = flow_graph(bundle_of(DAG, subflows={"child": CHILD}))
    assert [(e.source, e.target) for e in graph.edges if e.kind == "join"] == [
        ("b2", "join"),
        ("c", "join"),
    ]


def test_the_json_form_is_the_model_and_every_format_draws_the_same_graph(
    bundle_of: Callable[..., Bundle],
) -> None:
    bundle = bundle_of(EVERYTHING, subflows={"child": CHILD})
    graph = flow_graph(bundle)
    data = json.loads(draw(bundle, "json"))
    assert data == as_json(graph)
    assert (data["flow"], data["direction"]) == ("everything", "TD")
    assert [n["id"] for n in data["nodes"]] == [n.id for n in graph.nodes]
    triage = next(n for n in data["nodes"] if n["id"] == "triage")
    assert triage["label"] == "triage\nrouter" and triage["shape"] == "diamond"
    assert triage["handles"][0] == {"id": "route-1", "label": "regex ^err"}
    assert next(e for e in data["edges"] if e["kind"] == "exit")["style"] == "dashed"
    assert draw(bundle, "mermaid") == mermaid(graph)
    assert set(FORMATS) == {"mermaid", "dot", "json", "reactflow"}
    dot = draw(bundle, "dot")
    for edge in graph.edges:  # the same edges in every drawing
        assert f'"{edge.source}" -> "{edge.target}"' in dot


def test_blockyard_graph_prints_the_model_as_json(
    repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["graph", "hello", "--format", "json", "--root", str(repo_root)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == as_json(flow_graph(make_bundle(load_project(repo_root), "hello")))
    assert [(e["source"], e["target"], e["kind"]) for e in printed["edges"]] == [
        ("__start__", "greet", "next"),
        ("greet", "shout", "next"),
        ("shout", "__end__", "next"),
    ]
    assert main(["graph", "hello", "--format", "svg", "--root", str(repo_root)]) == 2
