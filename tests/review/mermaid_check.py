"""A structural check of the Mermaid flowcharts `blockyard diff --format markdown` writes: every line is
one of the statements the drawing uses, written the way Mermaid's flowchart grammar reads it, every
edge and class names a node that exists, every linkStyle an edge that exists, subgraphs balance."""

from __future__ import annotations

import re

ID = r"[A-Za-z_][A-Za-z0-9_-]*"
TEXT = r'"[^"\n]*"'  # quoted text: quotes, <, > and & are written as #quot; #lt; #gt; #amp;
SHAPES = [
    r"\[{t}\]",
    r"\{{{t}\}}",
    r"\{{\{{{t}\}}\}}",
    r"\[\[{t}\]\]",
    r"\[/{t}/\]",
    r"\(\[{t}\]\)",
    r"\(\({t}\)\)",
]
NODE = re.compile(rf"^\s+({ID})(?:{'|'.join(s.format(t=TEXT) for s in SHAPES)})$")
EDGE = re.compile(rf"^\s+({ID}) (-->|-\.->)(\|{TEXT}\|)? ({ID})$")
SUBGRAPH = re.compile(rf"^\s+subgraph ({ID})\[{TEXT}\]$")
CLASSDEF = re.compile(r"^\s+classDef (added|removed|changed) [a-z-]+:[^,;\s]+(,[a-z-]+:[^,;]+)*$")
CLASS = re.compile(rf"^\s+class ({ID}(?:,{ID})*) (added|removed|changed)$")
LINKSTYLE = re.compile(r"^\s+linkStyle (\d+(?:,\d+)*) [a-z-]+:[^,;\s]+(,[a-z-]+:[^,;\s]+)*$")
KEYWORDS = {
    "end",
    "graph",
    "subgraph",
    "flowchart",
    "style",
    "class",
    "classdef",
    "click",
    "linkstyle",
    "direction",
    "default",
    "call",
    "href",
}


def mermaid_problems(source: str) -> list[str]:
    """What is wrong with one flowchart ([] when every line parses and every name resolves)."""
    lines = source.rstrip("\n").split("\n")
    if not re.fullmatch(r"flowchart (TD|LR)", lines[0]):
        return [f"first line: {lines[0]!r}"]
    problems: list[str] = []
    nodes: set[str] = set()
    edges: list[tuple[str, str]] = []
    depth = 0
    classes: list[str] = []
    styled: list[int] = []
    for line in lines[1:]:
        if (match := NODE.match(line)) is not None:
            nodes.add(match.group(1))
        elif (match := EDGE.match(line)) is not None:
            edges.append((match.group(1), match.group(4)))
        elif SUBGRAPH.match(line):
            depth += 1
        elif line.strip() == "end":
            depth -= 1
            if depth < 0:
                problems.append("`end` without a subgraph")
        elif CLASSDEF.match(line):
            pass
        elif (match := CLASS.match(line)) is not None:
            classes += match.group(1).split(",")
        elif (match := LINKSTYLE.match(line)) is not None:
            styled += [int(n) for n in match.group(1).split(",")]
        else:
            problems.append(f"does not parse: {line!r}")
    if depth:
        problems.append("unbalanced subgraph")
    problems += [f"keyword as a node id: {n}" for n in nodes if n.lower() in KEYWORDS]
    problems += [
        f"edge to an unknown node: {a} -> {b}" for a, b in edges if a not in nodes or b not in nodes
    ]
    problems += [f"class of an unknown node: {n}" for n in classes if n not in nodes]
    problems += [f"linkStyle of edge {n}, of {len(edges)}" for n in styled if n >= len(edges)]
    return problems
