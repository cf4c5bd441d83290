"""GET /healthz, GET /diagnostics, GET /vocabulary, and the web page at /."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse

from engine.core.events import (
    EVENT_TYPES,
    RESERVED_EVENT_NAMES,
    STEP_EVENT_TYPES,
    TERMINAL_TYPES,
    RunStatus,
)
from engine.core.values import JsonDict
from engine.serve.routes.deps import get_server
from engine.serve.server import Server

router = APIRouter()
ServerDep = Annotated[Server, Depends(get_server)]
WEB = Path(__file__).resolve().parents[1] / "web"

# The engine's names a client shows, from their one declaration (engine/core/events.py): the web page reads them
# here, so a new event type is never taken for a step's custom event (`emit:`) by a list of the page's own.
VOCABULARY: dict[str, list[str]] = {
    "event_types": [str(kind) for kind in EVENT_TYPES],
    "step_event_types": [str(kind) for kind in EVENT_TYPES if kind in STEP_EVENT_TYPES],
    "terminal_event_types": [str(kind) for kind in EVENT_TYPES if kind in TERMINAL_TYPES],
    "reserved_event_names": sorted(str(name) for name in RESERVED_EVENT_NAMES),
    "run_statuses": [str(status) for status in RunStatus],
}


@router.get("/healthz", tags=["server"], summary="Liveness and load")
async def healthz(server: ServerDep) -> JsonDict:
    queue = server.queue
    return {
        "status": "ok"
        if queue is not None and queue.accepting
        else "starting"
        if queue is None
        else "stopping",
        "generation": server.catalog.generation,
        "flows": len(server.catalog.flows),
        "running": queue.running if queue else 0,
        "queued": queue.queued if queue else 0,
        "max_concurrent_runs": queue.limit if queue else server.catalog.max_concurrent_runs,
    }


@router.get(
    "/diagnostics",
    tags=["server"],
    summary="What the last reload found wrong",
    description="Every problem in the yard's files; flows listed under `stale` keep serving their "
    "last good version until their files are fixed.",
)
async def diagnostics(server: ServerDep) -> JsonDict:
    catalog = server.catalog
    return {
        "ok": catalog.ok and server.reloader.last_error is None,
        "generation": catalog.generation,
        "loaded_at": catalog.loaded_at,
        "diagnostics": [d.as_dict() for d in catalog.diagnostics],
        "stale": {
            name: {
                "serving_version": catalog.flows[name].version if name in catalog.flows else None,
                "problems": [d.as_dict() for d in problems],
            }
            for name, problems in catalog.stale.items()
        },
        "reload_error": server.reloader.last_error,
    }


@router.get(
    "/vocabulary",
    tags=["server"],
    summary="The engine's event types and run statuses",
    description="`event_types` (every type the engine emits; any other type is a step's custom event), "
    "`step_event_types`, `terminal_event_types` (those that end an execution), "
    "`reserved_event_names` (what a custom event may not be called: BY425), `run_statuses`; "
    "from engine/core/events.py. The web page tells the engine's events from custom ones by it "
    "(docs/serve.md).",
)
async def vocabulary() -> dict[str, list[str]]:
    return VOCABULARY


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})
