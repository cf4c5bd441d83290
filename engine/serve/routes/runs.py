"""GET /runs, GET /runs/{id}, GET /runs/{id}/events (SSE), POST /runs/{id}/resume."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from engine.core.events import APPROVAL_REQUIRED, RUN_STARTED, RunStatus
from engine.core.usage import Spend
from engine.core.values import JsonDict
from engine.serve.bodies import ResumeRequest, openapi_body, read_body
from engine.serve.follow import follow
from engine.serve.problems import ApiError, not_found
from engine.serve.routes.deps import get_server, job_outcome, trace_reader
from engine.serve.routes.flows import job_result
from engine.serve.server import Server
from engine.serve.sse import last_event_id, stream, wants_stream
from engine.state.stats import usage_dict
from engine.telemetry.traceparent import HEADER as TRACEPARENT

router = APIRouter(tags=["runs"])
ServerDep = Annotated[Server, Depends(get_server)]
STATUSES = tuple(RunStatus)


@router.get("/runs", summary="Runs, newest first (queued ones included)")
async def list_runs(
    server: ServerDep,
    flow: str | None = None,
    status: Annotated[str | None, Query(description=f"One of: {', '.join(STATUSES)}")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> JsonDict:
    if status is not None and status not in STATUSES:
        raise ApiError(
            422, "invalid_request", f"unknown status '{status}'; use one of: {', '.join(STATUSES)}"
        )
    service, queue = server.service, server.queue
    if service is None or queue is None:
        return {"runs": []}
    stored = await service.list_runs(flow=flow, status=status, limit=limit)
    seen = {run["id"] for run in stored}
    pending = [
        _unstarted(job.summary())
        for job in queue.jobs.values()
        if job.run_id not in seen
        and job.kind == "start"
        and (flow is None or job.flow == flow)
        and (status is None or job.state == status)
    ]
    return {"runs": (sorted(pending, key=lambda r: r["id"], reverse=True) + stored)[:limit]}


@router.get(
    "/runs/{run_id}",
    summary="One run: status, inputs, outputs, error, waiting gates, definition, graph, reactflow",
)
async def get_run(run_id: str, server: ServerDep) -> JsonDict:
    service, queue = server.service, server.queue
    if service is None or queue is None:
        raise ApiError(503, "starting", "the server is starting")
    run = await service.get_run(run_id)
    job = queue.jobs.get(run_id)
    if run is None:
        if job is None:
            raise not_found("run", f"unknown run '{run_id}'")
        return {**_unstarted(job.summary()), "gates": [], "graph": None, "reactflow": None}
    if job is not None and job.state == RunStatus.QUEUED:
        run["status"] = RunStatus.QUEUED  # a resume waiting for a slot
    run["gates"] = await _gates(server, run_id) if run["status"] == RunStatus.WAITING else []
    run["graph"] = run["reactflow"] = None
    bundle = await service.pinned_bundle(run["digest"])
    # the flow document the run is pinned to, as GET /flows/{name} gives the served one (`blockyard diff --server`
    # compares a paused run's step with the head's)
    run["definition"] = bundle.source.get("flow") if bundle is not None else None
    if bundle is not None:
        try:
            run["graph"] = await asyncio.to_thread(service.graph, bundle)
            # what the web page draws
            run["reactflow"] = await asyncio.to_thread(service.reactflow, bundle)
        except Exception:  # the graph is decoration; the run is what was asked for
            run["graph"] = run["reactflow"] = None
    return run


def _unstarted(summary: JsonDict) -> JsonDict:
    """A run this server holds before its row shows it: it has spent nothing yet (the `usage` every run has)."""
    return {**summary, "usage": usage_dict(Spend())}


async def _gates(server: Server, run_id: str) -> list[JsonDict]:
    """The approval_required events of the run's latest execution, one per waiting gate."""
    assert server.service is not None
    events = await server.service.events(run_id, 0)
    latest: list[JsonDict] = []
    for event in events:
        if event["type"] == RUN_STARTED:
            latest = []
        elif event["type"] == APPROVAL_REQUIRED:
            data = dict(event.get("data") or {})
            value = data.get("value")
            gate = {**value} if isinstance(value, dict) else {"message": value}
            gate.setdefault("step", event.get("step"))
            gate["interrupt_id"] = data.get("interrupt_id")
            latest.append(gate)
    return latest


@router.get(
    "/runs/{run_id}/events",
    summary="A run's events: replay, then follow live (SSE)",
    description="Server-sent events with `id` = the event's seq; reconnect with `Last-Event-ID` to get "
    "only what you missed. `Accept: application/json` returns the stored trace instead.",
    response_model=None,
)
async def run_events(run_id: str, request: Request, server: ServerDep) -> Response:
    service, queue = server.service, server.queue
    if service is None or queue is None:
        raise ApiError(503, "starting", "the server is starting")
    after = last_event_id(request)
    if run_id not in queue.jobs and await service.get_run(run_id) is None:
        raise not_found("run", f"unknown run '{run_id}'")
    accept = request.headers.get("accept", "")
    if "application/json" in accept and not wants_stream(request):
        return JSONResponse({"events": await service.events(run_id, after)})
    events = follow(run_id, after, server.broker, trace_reader(server), poll=server.settings.poll)
    return stream(events, ping=server.settings.sse_ping)


@router.post(
    "/runs/{run_id}/resume",
    summary="Decide a waiting gate, or continue a failed or interrupted run",
    response_model=None,
    openapi_extra=openapi_body(ResumeRequest),
)
async def resume_run(
    run_id: str,
    request: Request,
    server: ServerDep,
    wait: Annotated[bool, Query(description="Wait for the run to finish or pause.")] = True,
) -> Response | JsonDict:
    await server.known_run(run_id)  # an unknown run is a 404 whatever the body says
    body = await read_body(request, ResumeRequest) or ResumeRequest()
    if body.chosen() is None and (body.values or body.reason or body.gate or body.actor):
        raise ApiError(
            422,
            "invalid_request",
            "values, reason, gate and actor go with a decision: "
            'add "decision": "approve" or "reject"',
        )
    # read where the trace ends before the resume can add to it
    after = await _last_seq(server, run_id) if wants_stream(request) and server.service else 0
    job = await server.resume_run(
        run_id, body.resume(), traceparent=request.headers.get(TRACEPARENT)
    )
    if wants_stream(request):
        events = follow(
            run_id,
            after,
            server.broker,
            trace_reader(server),
            until_pause=True,
            poll=server.settings.poll,
        )
        return stream(events, ping=server.settings.sse_ping, epilogue=lambda: job_outcome(job))
    if not wait:
        return JSONResponse(
            {
                "run_id": run_id,
                "status": job.state,
                "flow": job.flow,
                "version": job.version,
                "links": {"run": f"/runs/{run_id}", "events": f"/runs/{run_id}/events"},
            },
            status_code=202,
        )
    return await job_result(job)


async def _last_seq(server: Server, run_id: str) -> int:
    assert server.service is not None
    events = await server.service.events(run_id, 0)
    return events[-1]["seq"] if events else 0
