"""An assistant's schemas and graph: the flow's contract as JSON Schemas, its graph model as LangGraph's
nodes and edges (GET /assistants/{id}/schemas, GET /assistants/{id}/graph)."""

from __future__ import annotations

from engine.compile.flowgraph import FlowGraph
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.serve.langgraph_api.messages import message_input
from engine.spec.typecheck import type_schema

MESSAGES_SCHEMA: JsonDict = {
    "type": "array",
    "items": {"type": "object"},
    "description": "LangChain messages, as chat UIs send them: the content of the last human message is the "
    "flow's message input (docs/langgraph-api.md).",
}


def input_schema(bundle: Bundle) -> JsonDict:
    """The flow's inputs; a conversation flow (one with a message input) also takes `messages`."""
    inputs = bundle.flow.inputs
    schema: JsonDict = {
        "title": f"{bundle.name} input",
        "type": "object",
        "properties": {name: type_schema(spec) for name, spec in inputs.items()},
        "required": [name for name, spec in inputs.items() if not spec.has_default],
        "additionalProperties": False,
    }
    target = message_input(bundle)
    if target is not None:
        schema["properties"]["messages"] = MESSAGES_SCHEMA
        others = [name for name in schema["required"] if name != target]
        schema["required"] = others
        schema["anyOf"] = [{"required": [target]}, {"required": ["messages"]}]
    return schema


def output_schema(bundle: Bundle) -> JsonDict:
    """The flow's outputs (their types are the steps' business: any), required unless declared optional."""
    flow = bundle.flow
    properties: JsonDict = {}
    for name in flow.outputs:
        declared = flow.output(name)
        properties[name] = {"description": declared.description} if declared.description else {}
    return {
        "title": f"{bundle.name} output",
        "type": "object",
        "properties": properties,
        "required": [name for name in flow.outputs if flow.output(name).required],
    }


def state_schema(bundle: Bundle) -> JsonDict:
    """What a thread's `values` hold: the run's inputs and outputs, and the conversation as `messages`."""
    properties = {
        **input_schema(bundle)["properties"],
        **output_schema(bundle)["properties"],
        "messages": {
            "type": "array",
            "items": {"type": "object"},
            "description": "The thread's conversation, as LangChain messages.",
        },
    }
    return {"title": f"{bundle.name} state", "type": "object", "properties": properties}


def graph_schemas(bundle: Bundle) -> JsonDict:
    return {
        "graph_id": bundle.name,
        "input_schema": input_schema(bundle),
        "output_schema": output_schema(bundle),
        "state_schema": state_schema(bundle),
        "config_schema": None,
        "context_schema": None,
    }


def graph(model: FlowGraph) -> JsonDict:
    """The graph model (engine/compile/flowgraph.py) in the JSON form of LangGraph's drawable graph."""
    nodes = [
        {
            "id": node.id,
            "type": "schema" if node.kind in ("start", "end") else "runnable",
            "data": {"name": node.id, "kind": node.kind, "label": node.label, "step": node.step},
        }
        for node in model.nodes
    ]
    edges = [
        {
            "source": edge.source,
            "target": edge.target,
            "conditional": edge.kind in ("branch", "route", "default", "exit", "loop-back"),
            **({"data": edge.label} if edge.label else {}),
        }
        for edge in model.edges
    ]
    return {"nodes": nodes, "edges": edges}
