"""GET /healthz, GET /diagnostics, and the web page at /."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse

from engine.serve.routes.deps import get_server
from engine.serve.server import Server

router = APIRouter()
ServerDep = Annotated[Server, Depends(get_server)]
WEB = Path(__file__).resolve().parents[1] / "web"


@router.get("/healthz", tags=["server"], summary="Liveness and load")
async def healthz(server: ServerDep) -> dict[str, Any]:
    queue = server.queue
    return {"status": "ok" if queue is not None and queue.accepting else "starting" if queue is None
            else "stopping",
            "generation": server.catalog.generation, "flows": len(server.catalog.flows),
            "running": queue.running if queue else 0, "queued": queue.queued if queue else 0,
            "max_concurrent_runs": queue.limit if queue else server.catalog.max_concurrent_runs}


@router.get("/diagnostics", tags=["server"], summary="What the last reload found wrong",
            description="Every problem in the yard's files; flows listed under `stale` keep serving their "
                        "last good version until their files are fixed.")
async def diagnostics(server: ServerDep) -> dict[str, Any]:
    catalog = server.catalog
    return {
        "ok": catalog.ok and server.reloader.last_error is None,
        "generation": catalog.generation,
        "loaded_at": catalog.loaded_at,
        "diagnostics": [d.as_dict() for d in catalog.diagnostics],
        "stale": {name: {"serving_version": catalog.flows[name].version if name in catalog.flows else None,
                         "problems": [d.as_dict() for d in problems]}
                  for name, problems in catalog.stale.items()},
        "reload_error": server.reloader.last_error,
    }


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})
