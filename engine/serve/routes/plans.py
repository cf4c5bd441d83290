"""POST /plans/runs: run a TaskPlan at once (docs/taskplans.md). The plan is validated exactly like a
flow (its diagnostics placed in the request body: `plan.steps[2].block_id`), pinned as a bundle by
hash and stored with the run, so its run resumes, waits at gates and shows like any other."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from engine.core.values import JsonDict
from engine.definitions.load import Document, LoadError, load_bytes
from engine.definitions.project import load_project
from engine.interchange.taskplan import PlanError, plan_bundle
from engine.serve.bodies import PlanRunRequest, openapi_body, read_body
from engine.serve.catalog import FlowEntry
from engine.serve.problems import ApiError
from engine.serve.routes.deps import get_server
from engine.serve.routes.flows import run_answer
from engine.serve.server import Server
from engine.telemetry.traceparent import HEADER as TRACEPARENT

router = APIRouter(tags=["plans"])
ServerDep = Annotated[Server, Depends(get_server)]
SHOWN = "plan"  # how diagnostics name the plan: the request's `plan` member


def plan_document(raw: bytes) -> Document:
    """The body's `plan` with the line and column of each value in the body (read_body checked the JSON)."""
    try:
        body = load_bytes(raw, SHOWN)
    except LoadError as exc:  # JSON that the YAML reader refuses (e.g. a tab): still a plan problem
        raise ApiError(422, "invalid_plan", exc.diagnostic.format()) from None
    marks = {path[1:]: mark for path, mark in body.marks.items() if path[:1] == ("plan",)}
    keys = {path[1:]: mark for path, mark in body.key_marks.items() if path[:1] == ("plan",)}
    return Document(body.path, SHOWN, body.data["plan"], marks, keys)


@router.post(
    "/plans/runs",
    summary="Run a TaskPlan",
    description="Validates the plan like a flow (422 `invalid_plan` with its diagnostics), pins it and "
    "runs it; waits for the run to finish or pause by default, `?wait=false` answers 202.",
    response_model=None,
    openapi_extra=openapi_body(PlanRunRequest),
)
async def run_plan(
    request: Request,
    server: ServerDep,
    wait: Annotated[bool, Query(description="Wait for the run to finish or pause.")] = True,
) -> Response | JsonDict:
    body = await read_body(request, PlanRunRequest)
    if body is None:
        raise ApiError(
            422, "invalid_request", 'the request body must be {"plan": {...}, "inputs": {...}}'
        )
    doc = plan_document(await request.body())
    try:
        project = await asyncio.to_thread(load_project, server.root)
        bundle = await asyncio.to_thread(plan_bundle, doc, project)
    except PlanError as exc:
        raise ApiError(
            422, exc.code, str(exc), diagnostics=[d.as_dict() for d in exc.diagnostics]
        ) from None
    entry = FlowEntry(bundle.name, bundle, SHOWN, time.time())
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
    return await run_answer(job, request, server, wait, digest=bundle.digest)
