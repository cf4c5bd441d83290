"""Reading a compiler's mermaid text back into nodes and edges for the web page."""

from __future__ import annotations

from typing import Any

import pytest

from engine.serve.graph import MermaidError, parse_mermaid

LANGGRAPH_STYLE = """---
config:
  flowchart:
    curve: linear
---
graph TD;
\t__start__([<p>__start__</p>]):::first
\ta(a)
\tb(b)
\t__end__([<p>__end__</p>]):::last
\t__start__ --> a;
\ta -. &nbsp;yes&nbsp; .-> b;
\ta -. &nbsp;no&nbsp; .-> __end__;
\tb --> __end__;
\tclassDef default fill:#f2f0ff,line-height:1.2
"""


def edges(graph: dict[str, Any]) -> list[tuple[str, str, str | None, str]]:
    return [(e["source"], e["target"], e["label"], e["style"]) for e in graph["edges"]]


def test_langgraph_style_output() -> None:
    graph = parse_mermaid(LANGGRAPH_STYLE)
    assert graph["direction"] == "TD"
    assert [(n["id"], n["label"], n["shape"]) for n in graph["nodes"]] == [
        ("__start__", "__start__", "stadium"), ("a", "a", "round"), ("b", "b", "round"),
        ("__end__", "__end__", "stadium")]
    assert edges(graph) == [("__start__", "a", None, "solid"), ("a", "b", "yes", "dotted"),
                            ("a", "__end__", "no", "dotted"), ("b", "__end__", None, "solid")]


def test_labels_shapes_chains_lists_and_subgraphs() -> None:
    graph = parse_mermaid("""flowchart LR
  %% a comment
  subgraph review ["review loop"]
    qa(["qa (llm)"]) -- "fail" --> fix{fix}
    fix -.->|again| qa
  end
  a & b --> c --> d[["sub: other"]]
  c==>e
  x-->y
  style x fill:#fff
""")
    assert graph["direction"] == "LR"
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert (nodes["qa"]["label"], nodes["qa"]["shape"], nodes["qa"]["group"]) == ("qa (llm)", "stadium", "review")
    assert (nodes["fix"]["shape"], nodes["d"]["label"], nodes["d"]["shape"]) == ("diamond", "sub: other", "subroutine")
    assert nodes["a"]["group"] is None
    assert graph["groups"] == [{"id": "review", "label": "review loop", "parent": None}]
    assert edges(graph) == [("qa", "fix", "fail", "solid"), ("fix", "qa", "again", "dotted"),
                            ("a", "c", None, "solid"), ("b", "c", None, "solid"), ("c", "d", None, "solid"),
                            ("c", "e", None, "thick"), ("x", "y", None, "solid")]


def test_quoted_labels_may_hold_brackets_and_entities() -> None:
    graph = parse_mermaid('flowchart TD\n  s1["map [item] #quot;x#quot;"] --> s2("a<br/>b")\n')
    labels = {n["id"]: n["label"] for n in graph["nodes"]}
    assert labels == {"s1": 'map [item] "x"', "s2": "a\nb"}


def test_quoted_edge_labels_may_hold_pipes_and_entity_codes() -> None:
    graph = parse_mermaid('flowchart TD\n  r{"route<br/>router"} -->|"regex ^(a|b)"| x\n'
                          '  r -->|"expr n #gt;= 8 #35;1"| y\n')
    assert edges(graph) == [("r", "x", "regex ^(a|b)", "solid"), ("r", "y", "expr n >= 8 #1", "solid")]
    assert graph["nodes"][0]["label"] == "route\nrouter"


@pytest.mark.parametrize("text", ["flowchart TD\n  a --> ", "flowchart TD\n  a[unclosed --> b", "flowchart TD\n  -->"])
def test_unreadable_text_is_a_clear_error(text: str) -> None:
    with pytest.raises(MermaidError):
        parse_mermaid(text)
