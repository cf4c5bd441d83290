"""A flow's graph for the web page: the compiler's mermaid text, read back into nodes and edges.

The page draws the graph itself (no mermaid.js, no CDN), from the JSON this module makes.
It understands the flowchart subset a compiler writes: `flowchart TD`, node shapes, edges
with and without labels (`-->`, `-.->`, `==>`, `-->|x|`, `-- x -->`), chains and `&` lists,
`subgraph ... end`; styling statements are ignored.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

_ID = re.compile(r"[A-Za-z0-9_][\w.\-]*")
# Opening delimiter -> (closing delimiter, shape name); longer openings first.
_SHAPES = [
    ("[[", "]]", "subroutine"), ("[(", ")]", "database"), ("((", "))", "circle"), ("([", "])", "stadium"),
    ("{{", "}}", "hexagon"), ("[/", "/]", "parallelogram"), ("[\\", "\\]", "parallelogram"),
    ("[", "]", "box"), ("(", ")", "round"), ("{", "}", "diamond"), (">", "]", "flag"),
]
_LABELLED_EDGE = re.compile(r"\s*(--|==|-\.)\s+(.+?)\s+(-{2,}>|={2,}>|\.+->|-{3,}|={3,}|\.+-)\s*")
_EDGE = re.compile(r"\s*<?(-\.+->?|-{2,}[>ox]?|={2,}[>ox]?)\s*(?:\|(\"[^\"]*\"|[^|]*)\|)?\s*")
_FRONT_MATTER = re.compile(r"\A\s*---\n.*?\n---\s*\n", re.S)
_MERMAID_ENTITY = re.compile(r"#(\w+|\d+);")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_SKIP = ("%%", "classDef ", "class ", "style ", "linkStyle ", "click ", "direction ", "accTitle", "accDescr")


@dataclass
class Graph:
    direction: str = "TD"
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"direction": self.direction, "nodes": list(self.nodes.values()), "edges": self.edges,
                "groups": self.groups}


class MermaidError(ValueError):
    """Text that is not a flowchart this reader understands."""


def parse_mermaid(text: str) -> dict[str, Any]:
    """Mermaid flowchart text -> {direction, nodes: [{id, label, shape, group}], edges: [{source,
    target, label, style}], groups: [{id, label, parent}]}."""
    graph = Graph()
    stack: list[str] = []
    text = _FRONT_MATTER.sub("", text, count=1)
    for raw in text.splitlines():
        line = raw.strip().rstrip(";").strip()
        if not line or line.startswith(_SKIP) or line.startswith("---"):
            continue
        head = line.split()[0]
        if head in ("flowchart", "graph"):
            parts = line.split()
            graph.direction = parts[1].upper() if len(parts) > 1 else "TD"
        elif head == "subgraph":
            group_id, label = _subgraph(line[len("subgraph"):].strip(), len(graph.groups))
            graph.groups.append({"id": group_id, "label": label, "parent": stack[-1] if stack else None})
            stack.append(group_id)
        elif line == "end":
            if stack:
                stack.pop()
        else:
            _statement(line, graph, stack[-1] if stack else None)
    return graph.as_dict()


def _subgraph(rest: str, index: int) -> tuple[str, str]:
    match = _ID.match(rest)
    if match is None:
        title = _unquote(rest) or f"group{index}"
        return f"group{index}", title
    group_id = match.group(0)
    tail = rest[match.end():].strip()
    if tail.startswith("["):
        return group_id, _unquote(tail[1:].rstrip("]").strip())
    return group_id, _unquote(rest) if tail else group_id


def _statement(line: str, graph: Graph, group: str | None) -> None:
    pos, previous = 0, None
    while pos < len(line):
        ids, pos = _node_list(line, pos, graph, group)
        if previous is not None:
            for source in previous[0]:
                for target in ids:
                    graph.edges.append({"source": source, "target": target, "label": previous[1],
                                        "style": previous[2]})
        if pos >= len(line):
            return
        match = _LABELLED_EDGE.match(line, pos)
        if match is not None:
            arrow, label = match.group(1) + match.group(3), _unquote(match.group(2))
        else:
            match = _EDGE.match(line, pos)
            if match is None:
                raise MermaidError(f"can't read '{line[pos:]}' in '{line}'")
            arrow, label = match.group(1), _unquote(match.group(2) or "")
        style = "dotted" if "." in arrow else "thick" if "=" in arrow else "solid"
        previous, pos = (ids, label or None, style), match.end()
        if pos >= len(line):
            raise MermaidError(f"edge without a target in '{line}'")


def _node_list(line: str, pos: int, graph: Graph, group: str | None) -> tuple[list[str], int]:
    ids = []
    while True:
        node_id, pos = _node(line, pos, graph, group)
        ids.append(node_id)
        rest = line[pos:]
        stripped = rest.lstrip()
        if not stripped.startswith("&"):
            return ids, pos
        pos += len(rest) - len(stripped) + 1


def _node(line: str, pos: int, graph: Graph, group: str | None) -> tuple[str, int]:
    while pos < len(line) and line[pos] == " ":
        pos += 1
    match = _ID.match(line, pos)
    if match is None:
        raise MermaidError(f"expected a node id at '{line[pos:]}'")
    node_id, pos = match.group(0), match.end()
    # `a-->b`: the id pattern allows '-' inside ids, so give back a trailing edge start.
    for arrow in ("--", "-.", "=="):
        cut = node_id.find(arrow)
        if cut > 0:
            pos -= len(node_id) - cut
            node_id = node_id[:cut]
            break
    label, shape = None, None
    for opening, closing, name in _SHAPES:
        if line.startswith(opening, pos):
            end = _closing(line, pos + len(opening), closing)
            label, shape = _unquote(line[pos + len(opening):end]), name
            pos = end + len(closing)
            break
    if line.startswith(":::", pos):
        klass = _ID.match(line, pos + 3)
        pos = klass.end() if klass else pos + 3
    node = graph.nodes.setdefault(node_id, {"id": node_id, "label": node_id, "shape": "box", "group": group})
    if label is not None:
        node["label"], node["shape"] = label, shape
        if group is not None:
            node["group"] = group
    return node_id, pos


def _closing(line: str, start: int, closing: str) -> int:
    text = line[start:].lstrip()
    if text.startswith('"'):
        quote_end = line.find('"', line.index('"', start) + 1)
        if quote_end >= 0:
            found = line.find(closing, quote_end + 1)
            if found >= 0:
                return found
    found = line.find(closing, start)
    if found < 0:
        raise MermaidError(f"unclosed node shape in '{line}'")
    return found


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = _TAG.sub("", text.replace("<br/>", "\n").replace("<br>", "\n")).replace("&nbsp;", " ").strip()
    # mermaid's entity codes (#quot; #gt; #35;), then ordinary HTML entities
    text = _MERMAID_ENTITY.sub(lambda m: html.unescape(f"&#{m.group(1)};" if m.group(1).isdigit()
                                                       else f"&{m.group(1)};"), text)
    return html.unescape(text)
