"""Assistants are the served flows: POST /assistants/search, /assistants/count, GET /assistants/{id} and its
/graph, /schemas, /subgraphs, POST /assistants/{id}/versions; and GET /info, GET /ok."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request

from engine.compile.flowgraph import flow_graph
from engine.core.values import JsonDict
from engine.core.version import __version__
from engine.serve.bodies import read_body
from engine.serve.catalog import FlowEntry
from engine.serve.langgraph_api.access import ServerDep
from engine.serve.langgraph_api.bodies import AssistantSearch
from engine.serve.langgraph_api.schemas import graph, graph_schemas
from engine.serve.langgraph_api.shapes import Assistant, assistant
from engine.serve.server import Server

router = APIRouter(tags=["langgraph: assistants"])


@router.get("/ok", summary="Liveness, as LangGraph clients check it")
async def ok() -> dict[str, bool]:
    return {"ok": True}


@router.get("/info", summary="What this server is and supports")
async def info(server: ServerDep) -> JsonDict:
    return {
        "version": __version__,
        "server": "blockyard",
        "flags": {
            "assistants": True,
            "crons": server.catalog.server.api_crons,  # made over the API (docs/langgraph-api.md)
            "langsmith": False,
            "langsmith_tracing_replicas": False,
        },
        "metadata": {"docs": "docs/langgraph-api.md"},
    }


def _matches(entry: FlowEntry, body: AssistantSearch) -> bool:
    shown = assistant(entry)
    if body.graph_id is not None and body.graph_id != entry.name:
        return False
    if body.name is not None and body.name.lower() not in entry.name.lower():
        return False
    return all(shown["metadata"].get(key) == value for key, value in (body.metadata or {}).items())


def _search(server: Server, body: AssistantSearch) -> list[FlowEntry]:
    return [entry for entry in server.catalog.flows.values() if _matches(entry, body)]


@router.post("/assistants/search", summary="The served flows, as assistants", response_model=None)
async def search(request: Request, server: ServerDep) -> list[Assistant]:
    body = await read_body(request, AssistantSearch) or AssistantSearch()
    found = _search(server, body)
    return [assistant(entry) for entry in found[body.offset : body.offset + body.limit]]


@router.post("/assistants/count", summary="How many served flows match")
async def count(request: Request, server: ServerDep) -> int:
    body = await read_body(request, AssistantSearch) or AssistantSearch()
    return len(_search(server, body))


@router.get(
    "/assistants/{assistant_id}",
    summary="One flow as an assistant (its version: the flow's)",
    response_model=None,
)
async def get(assistant_id: str, server: ServerDep) -> Assistant:
    return assistant(server.flow(assistant_id))


@router.post(
    "/assistants/{assistant_id}/versions",
    summary="The served version of the flow",
    response_model=None,
)
async def versions(assistant_id: str, server: ServerDep) -> list[Assistant]:
    return [assistant(server.flow(assistant_id))]


@router.get("/assistants/{assistant_id}/graph", summary="The flow's graph: nodes and edges")
async def get_graph(assistant_id: str, server: ServerDep) -> JsonDict:
    entry = server.flow(assistant_id)
    return graph(await asyncio.to_thread(flow_graph, entry.bundle))


@router.get(
    "/assistants/{assistant_id}/schemas", summary="Input, output and state JSON Schemas of the flow"
)
async def schemas(assistant_id: str, server: ServerDep) -> JsonDict:
    return graph_schemas(server.flow(assistant_id).bundle)


@router.get("/assistants/{assistant_id}/subgraphs", summary="Subgraphs (none are exposed)")
async def subgraphs(assistant_id: str, server: ServerDep) -> JsonDict:
    server.flow(assistant_id)
    return {}
