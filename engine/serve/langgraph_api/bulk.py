"""Several at once: POST /runs/batch (start runs), POST /runs/cancel (stop runs), POST /threads/prune (delete
threads). Each reuses the one-at-a-time path (runs.start, runs.cancel_one, threads.remove) and judges the whole
request before it acts, so a refused request changes nothing."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from engine.core.events import RunStatus
from engine.serve.bodies import read_body, read_body_list
from engine.serve.jobs import Job
from engine.serve.langgraph_api import runs, shapes, threads
from engine.serve.langgraph_api.access import ServerDep, busy, find_view, service
from engine.serve.langgraph_api.bodies import BatchRun, CancelMany, ThreadPrune
from engine.serve.problems import ApiError, conflict
from engine.serve.server import Server
from engine.telemetry.traceparent import HEADER as TRACEPARENT

router = APIRouter(tags=["langgraph: several at once"])
MOST = 100  # runs one batch starts, threads one prune deletes: a request's work stays bounded


@router.post(
    "/runs/batch",
    summary="Start several runs in the background; the runs, in order",
    response_model=None,
)
async def create_batch(request: Request, server: ServerDep) -> list[shapes.Run]:
    bodies = await read_body_list(request, BatchRun, MOST)
    if not bodies:
        raise ApiError(
            422, "invalid_request", 'the body must list the runs: [{"assistant_id": "FLOW"}, ...]'
        )
    for body in bodies:  # every flow is known before any run starts
        server.flow(body.assistant_id)
    traceparent = request.headers.get(TRACEPARENT)
    made: list[shapes.Run] = []
    for body in bodies:
        started = await runs.start(server, body.thread_id, body, traceparent)
        made.append(await runs.created_run(server, started))
    return made


async def _pending(server: Server, job: Job) -> bool:
    """LangGraph's `pending`: queued, or a turn waiting for the thread's turn before it (no row yet)."""
    if job.state == RunStatus.QUEUED:
        return True
    return (
        job.kind == "start"
        and job.thread is not None
        and await service(server).get_run(job.run_id) is None
    )


async def _by_status(server: Server, status: str, thread_id: str | None) -> list[Job]:
    held = [
        job
        for job in (server.queue.jobs.values() if server.queue is not None else [])
        if job.task is not None
        and job.state in (RunStatus.QUEUED, RunStatus.RUNNING)
        and (thread_id is None or job.thread == thread_id)
    ]
    if status == "all":
        return held
    return [job for job in held if await _pending(server, job) == (status == "pending")]


@router.post(
    "/runs/cancel",
    summary="Cancel several runs: by id, or every run queued or running",
    status_code=204,
    response_model=None,
)
async def cancel_many(request: Request, server: ServerDep, action: str = "interrupt") -> Response:
    runs.check_cancel_action(action)
    body = await read_body(request, CancelMany) or CancelMany()
    if body.status is not None and body.run_ids:
        raise ApiError(422, "invalid_request", "send run_ids or status, not both", field="status")
    if body.status is None and not body.run_ids:
        raise ApiError(
            422,
            "invalid_request",
            "name the runs to cancel: run_ids (with their thread_id), or status "
            "(pending, running or all)",
            field="run_ids",
        )
    if body.status is not None:
        targets = [
            (job.thread, job.run_id)
            for job in await _by_status(server, body.status, body.thread_id)
        ]
    else:
        ids = list(dict.fromkeys(body.run_ids or []))[: MOST * 10]
        for (
            run_id
        ) in ids:  # every run is known before any is cancelled: 404 names the first that is not
            if body.thread_id is not None:
                await runs.run_of(server, body.thread_id, run_id)
            else:
                await server.known_run(run_id)
        jobs = server.queue.jobs if server.queue is not None else {}
        # only those going on: the others are over already, which is what cancelling them asks
        targets = [
            (jobs[run_id].thread, run_id)
            for run_id in ids
            if run_id in jobs and jobs[run_id].task is not None and jobs[run_id].state != "done"
        ]
    rollback = action == "rollback"  # each stopped (waited for), then deleted
    reason = "cancelled by a client (rollback)" if rollback else "cancelled by a client"
    for thread_id, run_id in targets:
        try:
            await runs.cancel_one(server, thread_id, run_id, rollback, reason)
        except ApiError as exc:
            if exc.status != 409:  # one that ended meanwhile is cancelled enough, and stays
                raise
            continue
        if rollback:
            await runs.roll_back(server, thread_id, [run_id])
    return Response(status_code=204)


@router.post("/threads/prune", summary="Delete several threads; how many were deleted")
async def prune(request: Request, server: ServerDep) -> dict[str, int]:
    body = await read_body(request, ThreadPrune)
    if body is None:
        raise ApiError(
            422, "invalid_request", 'the body must list the threads: {"thread_ids": [...]}'
        )
    if body.strategy == "keep_latest":
        raise ApiError(
            422,
            "invalid_request",
            "strategy 'keep_latest' is not supported: a thread's state is read "
            "from its runs, one checkpoint per run, and none of them is "
            "dropped; use strategy 'delete'",
            field="strategy",
        )
    if len(body.thread_ids) > MOST:
        raise ApiError(
            422,
            "invalid_request",
            f"thread_ids lists {len(body.thread_ids)} threads; at most {MOST}",
            field="thread_ids",
        )
    found = []
    for thread_id in dict.fromkeys(body.thread_ids):  # an unknown thread is nothing to prune
        view = await find_view(server, thread_id)
        if view is None:
            continue
        if busy(server, thread_id) or view.last_status in (RunStatus.RUNNING, RunStatus.WAITING):
            raise conflict(
                "thread_busy",
                f"thread '{thread_id}' has a run going on or waiting for an approval; "
                "nothing was pruned",
            )
        found.append(thread_id)
    for thread_id in found:
        await threads.remove(server, thread_id)
    return {"pruned_count": len(found)}
