"""React Flow graphs -> a flow (docs/reactflow.md): `blockyard import reactflow GRAPH.json`.

A graph is `{nodes: [{id, type, data, position}], edges: [{id, source, target, sourceHandle?}]}`
(plus Blockyard's optional `flow`: the flow's own settings). Every node becomes a step; what
follows what comes from the edges:

- an edge without a handle is "then": one leaving a node is its `goto`; several leaving one node
  run their targets in parallel, and a node reached from parallel nodes waits for all of them
  (`needs`); several reaching a node from different ways (a router's arms) just merge;
- a router's edges leave by the handles its routes name (`target_handle`) or its `default_handle`;
- an iterator's (or loop's, or map's) `NEXT` edge starts its body, whose last nodes lead back to
  it; its `COMPLETE` edge is what follows the last item (a `foreach`, `loop` or `map` body);
- `branch-<value>` handles are a decide step's branches; `reject`, `timeout` and `max_visits`
  handles are the exits of an approval, a `require_approval` gate and `max_visits`;
- an edge from an agent to an agent makes the target a sub-agent the source calls as a tool
  (unless the edge says `data.kind: next`);
- an `end` node (or an edge back to the body's iterator) ends the run (or the item's pass).

`data.step` holds a step's own settings as a flow file writes them (`with`, `outputs`, `emit`,
`max_visits`, ...): what an exported flow carries besides the node types' own fields.

Errors of the graph's shape name the node or edge; the flow it converts to is then checked by the
validator like any flow. Blocks: a node with `data.block` runs that block of the yard; agent,
tool and smart nodes without one get a new block (or an existing one with the same contract,
engine/interchange/blocks.py). The inverse is engine/compile/reactflow.py.

The converter is one class built in stages, each module a stage on top of the one before:
model.py (the node and edge types, GraphError, reading the JSON), edges.py (what each edge means),
regions.py (the entry, and which step list each node is in), messages.py (where each node's message
is kept and read from), kinds.py (the block each kind of node becomes), steps.py (the step lists),
convert.py (`convert`, running the stages).
"""

from __future__ import annotations

from engine.interchange.reactflow.convert import convert
from engine.interchange.reactflow.model import (
    Converted,
    Edge,
    GraphError,
    Node,
    as_dict,
    as_list,
    parse_json,
)

__all__ = ["Converted", "Edge", "GraphError", "Node", "as_dict", "as_list", "convert", "parse_json"]
