"""`blockyard import reactflow`: a graph with every node type runs offline to the expected outputs,
and broken graphs are refused with one line naming the node or edge (exit 1, never a traceback)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.cli import main
from engine.core.events import RunStatus
from engine.runtime.yard import Yard
from tests.support import processes

REPO = Path(__file__).resolve().parents[2]

CONFIG = """
models:
  default:
    provider: mock
    replies:
      triage: [{category: billing}]
      lead:
        - $tool_calls: [{name: researcher, args: {message: "What did the customer pay twice?"}}]
        - {answer: "Refund the second charge."}
      researcher: [{answer: "Two charges of 12 EUR on May 2."}]
      note: [{answer: "noted: invoices"}, {answer: "noted: refunds"}]
      send: [{answer: "Dear customer, we refunded the second charge."}]
"""


def node(node_id: str, kind: str, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "type": kind, "data": data, "position": {"x": 0, "y": 0}}


def edge(edge_id: str, source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"id": edge_id, "source": source, "target": target}
    if handle is not None:
        found["sourceHandle"] = handle
    return found


def full_graph() -> dict[str, Any]:
    """Every node type: a smart node, a router with three handles and a default, agents delegating to a
    sub-agent, a tool, an iterator with NEXT/COMPLETE, a node requiring approval, an end node."""
    return {
        "flow": {"inputs": {"topics": {"type": "array", "items": {"type": "string"}}}},
        "nodes": [
            node(
                "triage",
                "smart_node",
                label="Triage",
                isStart=True,
                mode="ChainOfThought",
                goal="Sort the customer's message into billing, bug, refund or other.",
                inputs=[{"name": "message", "desc": "The customer's message."}],
                outputs=[{"name": "category", "desc": "billing, bug, refund or other."}],
            ),
            node(
                "route",
                "router",
                routes=[
                    {"condition": "equals", "value": "billing", "target_handle": "to_billing"},
                    {"condition": "contains", "value": "bug", "target_handle": "to_bug"},
                    {"condition": "regex", "value": "^refund", "target_handle": "to_refund"},
                ],
                default_handle="other",
            ),
            node(
                "lead",
                "agent",
                label="Billing lead",
                system_prompt="You lead billing. Be brief.",
                tools=["current_time"],
                max_iterations=4,
            ),
            node("researcher", "agent", label="Researcher", system_prompt="You look up payments."),
            node("clock", "tool", tool="current_time", args={"timezone": "UTC"}),
            node("fallback", "agent", label="Fallback", system_prompt="You answer anything else."),
            node("each", "iterator", items="inputs.topics", **{"as": "topic"}),
            node("note", "agent", label="Note taker", system_prompt="Note the topic {{ tone }}."),
            node(
                "send",
                "agent",
                label="Sender",
                system_prompt="You write the reply.",
                require_approval=True,
            ),
            node("done", "end"),
        ],
        "edges": [
            edge("e1", "triage", "route"),
            edge("e2", "route", "lead", "to_billing"),
            edge("e3", "route", "clock", "to_bug"),
            edge("e4", "route", "done", "to_refund"),
            edge("e5", "route", "fallback", "other"),
            edge("e6", "lead", "researcher"),
            edge("e7", "lead", "each"),
            edge("e8", "each", "note", "NEXT"),
            edge("e9", "note", "each"),
            edge("e10", "each", "send", "COMPLETE"),
            edge("e11", "clock", "send"),
            {
                **edge("e12", "fallback", "send"),
                "data": {"kind": "next"},
            },  # "then", not a delegation
        ],
    }


def make_yard(tmp_path: Path) -> Path:
    root = tmp_path / "yard"
    (root / "flows").mkdir(parents=True)
    (root / "blocks").mkdir()
    (root / "blockyard.yaml").write_text(CONFIG, encoding="utf-8")
    return root


def write(tmp_path: Path, graph: Any, name: str = "graph.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(graph) if not isinstance(graph, str) else graph, encoding="utf-8")
    return path


def test_a_graph_with_every_node_type_imports_validates_and_runs_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(tmp_path)
    graph = write(tmp_path, full_graph())
    assert (
        main(["import", "reactflow", str(graph), "--name", "support", "--root", str(root)]) == 0
    ), capsys.readouterr().err
    flow = yaml.safe_load((root / "flows" / "support.yaml").read_text(encoding="utf-8"))
    steps = {step["id"]: step for step in flow["steps"]}
    assert steps["triage"].get("start") is None and flow["steps"][0]["id"] == "triage"
    assert steps["route"]["router"] == {
        "value": "{{ context.category }}",
        "routes": [
            {"equals": "billing", "goto": "lead"},
            {"contains": "bug", "goto": "clock"},
            {"regex": "^refund", "goto": "end"},
        ],
        "default": "fallback",
    }
    assert steps["lead"]["delegates"] == ["researcher"]
    assert steps["each"]["foreach"]["items"] == "inputs.topics"
    assert [s["id"] for s in steps["each"]["foreach"]["steps"]] == ["note"]
    assert steps["send"]["require_approval"] is True
    assert set(flow["inputs"]) == {"message", "tone", "topics"}
    blocks = {
        p.stem: yaml.safe_load(p.read_text(encoding="utf-8"))
        for p in (root / "blocks").glob("*.yaml")
    }
    assert blocks["triage"]["kind"] == "smart" and blocks["triage"]["mode"] == "chain_of_thought"
    assert (
        blocks["billing_lead"]["tools"] == ["current_time"]
        and blocks["billing_lead"]["max_iterations"] == 4
    )
    assert blocks["current_time"] == {
        "block": "current_time",
        "version": 1,
        "description": "Call the current_time tool.",
        "kind": "tool",
        "tool": "current_time",
        "inputs": {"timezone": {"type": "any"}},
        "outputs": {"result": {"type": "any", "description": "What current_time returned."}},
    }

    with Yard.load(root, state=tmp_path / "state.db") as yard:
        first = yard.run(
            "support",
            {"message": "I was charged twice", "topics": ["invoices", "refunds"], "tone": "kindly"},
        )
        assert first.status == RunStatus.WAITING and first.step == "send"
        result = yard.resume(first.run_id, approve=True)
    assert result.status == RunStatus.FINISHED, result.error
    assert result.outputs == {
        "category": "billing",
        "lead": "Refund the second charge.",
        "note": "noted: refunds",
        "send": "Dear customer, we refunded the second charge.",
    }

    # importing the same graph again reuses the blocks it wrote: same contract, nothing new
    before = sorted(p.name for p in (root / "blocks").iterdir())
    assert (
        main(["import", "reactflow", str(graph), "--name", "support_again", "--root", str(root)])
        == 0
    )
    assert sorted(p.name for p in (root / "blocks").iterdir()) == before


def broken(mutate: Any) -> dict[str, Any]:
    graph = full_graph()
    mutate(graph)
    return graph


def _node(graph: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in graph["nodes"] if n["id"] == node_id)


BROKEN: dict[str, tuple[Any, str]] = {
    "two starts": (
        lambda g: _node(g, "lead")["data"].update(isStart=True),
        "2 start nodes: 'triage', 'lead'",
    ),
    "no start": (
        lambda g: (
            _node(g, "triage")["data"].pop("isStart"),
            g["edges"].append(edge("x", "send", "triage")),
        ),
        "no start node: every node has an incoming edge",
    ),
    "several free nodes": (
        lambda g: (
            _node(g, "triage")["data"].pop("isStart"),
            g["nodes"].append(node("orphan", "tool", tool="current_time")),
        ),
        "no start node: 2 nodes have no incoming edge ('triage', 'orphan')",
    ),
    "edge to a missing node": (
        lambda g: g["edges"].append(edge("e99", "send", "ghost")),
        "edge 'e99': its target \"ghost\" is not a node of the graph",
    ),
    "edge from a missing node": (
        lambda g: g["edges"].append(edge("e98", "phantom", "send")),
        "edge 'e98': its source \"phantom\" is not a node of the graph",
    ),
    "unknown router handle": (
        lambda g: g["edges"].__setitem__(1, edge("e2", "route", "lead", "to_nowhere")),
        "edge 'e2': router 'route' has no handle 'to_nowhere' (no route names it; its "
        "handles: to_billing, to_bug, to_refund, other)",
    ),
    "unknown type": (
        lambda g: _node(g, "clock").update(type="webhook"),
        "node 'clock': unknown type \"webhook\"",
    ),
    "duplicate id": (
        lambda g: g["nodes"].append(node("clock", "tool", tool="current_time")),
        "node 'clock': the id is used by another node too",
    ),
    "iterator without NEXT": (
        lambda g: g["edges"].__setitem__(7, edge("e8", "each", "note", "COMPLETE")),
        "iterator 'each': no NEXT edge to the first node of its body",
    ),
    "iterator left without a handle": (
        lambda g: g["edges"].__setitem__(9, edge("e10", "each", "send")),
        "edge 'e10': it leaves iterator 'each' by no handle",
    ),
    "body leaks out": (
        lambda g: g["edges"].__setitem__(8, edge("e9", "note", "send")),
        "iterator 'each': its body (NEXT) reaches 'send', which follows it (COMPLETE)",
    ),
    "unknown condition": (
        lambda g: _node(g, "route")["data"]["routes"][0].update(condition="like"),
        "router 'route': routes[0] has condition \"like\"",
    ),
    "handle on a plain node": (
        lambda g: g["edges"].__setitem__(0, edge("e1", "triage", "route", "bottom")),
        "edge 'e1': node 'triage' (smart_node) has no handle 'bottom'",
    ),
    "tool without a name": (
        lambda g: _node(g, "clock")["data"].pop("tool"),
        "tool 'clock': data.tool names the tool it calls",
    ),
    "no nodes": (lambda g: g.update(nodes=[], edges=[]), "the graph has no nodes"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_graph_is_refused_naming_the_node(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(tmp_path)
    mutate, expected = BROKEN[case]
    graph = write(tmp_path, broken(mutate))
    assert main(["import", "reactflow", str(graph), "--root", str(root)]) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert any(line.startswith("error: graph.json: ") and expected in line for line in lines), err
    assert "Traceback" not in err
    assert not list((root / "flows").iterdir())  # nothing written


def test_not_json_and_not_a_graph_are_one_line_errors(tmp_path: Path) -> None:
    root = make_yard(tmp_path)
    for text, expected in (
        ("{nodes:", "error: graph.json: not JSON"),
        ("[1, 2]", "error: graph.json: a graph is an object {nodes: [...], edges: [...]}"),
    ):
        graph = write(tmp_path, text)
        done = processes.run(
            [
                sys.executable,
                "-m",
                "engine",
                "import",
                "reactflow",
                str(graph),
                "--root",
                str(root),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # as the fork server's (processes.py)
        assert done.returncode == 1
        assert done.stderr.startswith(expected) and "Traceback" not in done.stderr
