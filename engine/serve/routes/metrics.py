"""GET /metrics: the server's Prometheus metrics in the text format (engine/serve/metrics.py), behind
the server's token like every other route (docs/observability.md, "Prometheus metrics")."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from engine.serve.metrics import CONTENT_TYPE
from engine.serve.routes.deps import get_server
from engine.serve.server import Server

router = APIRouter(tags=["server"])
ServerDep = Annotated[Server, Depends(get_server)]


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format 0.0.4)",
    response_class=Response,
    description="Runs started, finished and failed, step and model-call latencies, tokens and cost per "
    "flow and model, the queue, running and waiting runs. See docs/observability.md.",
)
async def metrics(server: ServerDep) -> Response:
    service, queue = server.service, server.queue
    waiting = await service.waiting_by_flow() if service is not None else {}
    server.metrics.snapshot(
        queued=queue.queued if queue else 0, running=queue.running if queue else 0, waiting=waiting
    )
    # off the server's loop: the exposition first has the observer told what waits, which may wait for
    # the observers' thread to finish a row of executions (engine/core/later.py)
    text = await asyncio.to_thread(server.metrics.exposition)
    return Response(text, media_type=CONTENT_TYPE)
