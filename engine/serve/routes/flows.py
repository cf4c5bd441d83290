"""GET /flows, GET /flows/{name} (with its graph), POST /flows/{name}/runs."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from engine.compile.reactflow import reactflow
from engine.core.values import JsonDict
from engine.serve.bodies import RunRequest, openapi_body, read_body
from engine.serve.catalog import FlowEntry
from engine.serve.follow import follow
from engine.serve.jobs import Job
from engine.serve.routes.deps import get_server, job_outcome, trace_reader
from engine.serve.server import Server
from engine.serve.sse import stream, wants_stream
from engine.spec.cron import next_fire
from engine.telemetry.traceparent import HEADER as TRACEPARENT

router = APIRouter(tags=["flows"])
ServerDep = Annotated[Server, Depends(get_server)]


def flow_summary(server: Server, entry: FlowEntry) -> JsonDict:
    spec = entry.bundle.flow
    problems = server.catalog.stale.get(entry.name, ())
    summary: JsonDict = {
        "name": entry.name,
        "version": entry.version,
        "description": spec.description,
        "digest": entry.digest,
        "file": entry.file,
        "tags": list(spec.tags),
        "loaded_at": entry.loaded_at,
        "inputs": {name: t.model_dump(exclude_unset=True) for name, t in spec.inputs.items()},
        "outputs": list(spec.outputs),
        "stale": bool(problems),
        "problems": [d.as_dict() for d in problems],
        "schedule": None,
    }
    if spec.schedule is not None:
        scheduler = server.scheduler
        upcoming = (
            scheduler.next_fire(entry)
            if scheduler
            else next_fire(spec.schedule, server.settings.clock.now())
        )
        state = scheduler.states.get(entry.name) if scheduler else None
        summary["schedule"] = {
            "cron": spec.schedule.cron,
            "timezone": spec.schedule.timezone,
            "misfire": spec.schedule.misfire,
            "inputs": spec.schedule.inputs,
            "next_fire": upcoming.isoformat() if upcoming else None,
            "last_fire": state.last_fire.isoformat() if state and state.last_fire else None,
            "last_run": state.last_run if state else None,
        }
    return summary


@router.get("/flows", summary="The served flows, with their schedules' next fire times")
async def list_flows(server: ServerDep) -> JsonDict:
    return {"flows": [flow_summary(server, entry) for entry in server.catalog.flows.values()]}


@router.get(
    "/flows/{name}",
    summary="One flow, with its graph",
    description="`?format=reactflow` answers the flow as a React Flow graph instead (docs/reactflow.md).",
)
async def get_flow(
    name: str,
    server: ServerDep,
    format: Annotated[
        Literal["reactflow"] | None, Query(description="reactflow: the flow as a React Flow graph")
    ] = None,
) -> JsonDict:
    entry = server.flow(name)
    if format == "reactflow":
        # cached by digest
        draw = server.service.reactflow if server.service is not None else reactflow
        return await asyncio.to_thread(draw, entry.bundle)
    detail = flow_summary(server, entry)
    detail["definition"] = entry.bundle.source.get("flow")
    detail["graph"], detail["graph_error"] = None, None
    if server.service is not None:
        try:
            detail["graph"] = await asyncio.to_thread(server.service.graph, entry.bundle)
        except Exception as exc:  # drawing is a convenience: never fail the request for it
            detail["graph_error"] = f"the graph could not be drawn: {exc}"
    return detail


@router.post(
    "/flows/{name}/runs",
    summary="Start a run",
    description="Waits for the run to finish or pause by default; `?wait=false` answers 202 at once; "
    "`Accept: text/event-stream` streams the run's events until it finishes or pauses.",
    response_model=None,
    openapi_extra=openapi_body(RunRequest),
)
async def start_run(
    name: str,
    request: Request,
    server: ServerDep,
    wait: Annotated[bool, Query(description="Wait for the run to finish or pause.")] = True,
) -> Response | JsonDict:
    entry = server.flow(name)  # an unknown flow is a 404 whatever the body says
    body = await read_body(request, RunRequest) or RunRequest()
    job = await server.start_run(
        entry,
        body.inputs,
        body.run_id,
        output_dir=body.output_dir,
        durability=body.durability,
        trace=body.trace,
        traceparent=request.headers.get(TRACEPARENT),
        webhook=body.webhook,
    )
    return await run_answer(job, request, server, wait)


async def run_answer(
    job: Job, request: Request, server: Server, wait: bool, **shown: Any
) -> Response:
    """A run just started, answered as the client asked: its events as a stream (`Accept:
    text/event-stream`), 202 at once (`?wait=false`, with `shown` added), or its result."""
    if wants_stream(request):
        events = follow(
            job.run_id,
            0,
            server.broker,
            trace_reader(server),
            until_pause=True,
            poll=server.settings.poll,
        )
        return stream(events, ping=server.settings.sse_ping, epilogue=lambda: job_outcome(job))
    if not wait:
        return JSONResponse(
            {
                "run_id": job.run_id,
                "status": job.state,
                "flow": job.flow,
                "version": job.version,
                **shown,
                "links": {"run": f"/runs/{job.run_id}", "events": f"/runs/{job.run_id}/events"},
            },
            status_code=202,
        )
    return await job_result(job)


async def job_result(job: Any) -> JSONResponse:
    # shield: a client that hangs up must not cancel the run
    result: JsonDict = await asyncio.shield(job.result)
    return JSONResponse(result)
