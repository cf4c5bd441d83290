"""Crons: POST /runs/crons, POST /threads/{id}/runs/crons, POST /runs/crons/search and /count, PATCH and
DELETE /runs/crons/{id} (docs/langgraph-api.md, "Crons").

A cron made here is a runtime object of the state database (engine/state/crons.py), apart from the
`schedule:` of flows in Git, and fired by the same scheduler (engine/serve/schedules.py): each fire time
once across replicas; `blockyard schedules` lists both, with their origin. Its inputs are checked against
the flow when it is made (and made again when it fires: the flow may have changed since). A thread's cron
starts a turn of that thread, which waits for the turn before it; a cron without a thread starts a run
without one. `server.api_crons: false` in blockyard.yaml refuses to make one (403).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from engine.core.events import now_iso
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.serve.bodies import read_body
from engine.serve.langgraph_api.access import ServerDep, service, view_of
from engine.serve.langgraph_api.bodies import CronCreate, CronPatch, CronSearch
from engine.serve.langgraph_api.messages import run_inputs
from engine.serve.langgraph_api.shapes import iso
from engine.serve.problems import ApiError, conflict, not_found
from engine.serve.server import Server
from engine.spec.cron import next_fire, schedule_problem
from engine.spec.flow import ScheduleSpec
from engine.state import crons
from engine.state.ids import new_run_id

router = APIRouter(tags=["langgraph: crons"])
# the request's keys a cron keeps for its runs (and shows as its payload); the others are accepted and ignored
KEPT = ("input", "metadata", "webhook", "multitask_strategy", "config", "context")


@router.post("/runs/crons", summary="Make a cron: runs of a flow on a schedule, without a thread")
async def create(request: Request, server: ServerDep) -> JSONResponse:
    body = _sent(await read_body(request, CronCreate))
    return JSONResponse(await _make(server, body, None))


@router.post(
    "/threads/{thread_id}/runs/crons", summary="Make a cron: turns of a thread on a schedule"
)
async def create_for_thread(request: Request, thread_id: str, server: ServerDep) -> JSONResponse:
    body = _sent(await read_body(request, CronCreate))
    view = await view_of(server, thread_id)  # 404 for an unknown thread
    if view.thread.flow and view.thread.flow != body.assistant_id:
        raise conflict(
            "wrong_flow",
            f"thread '{thread_id}' is a conversation with flow '{view.thread.flow}', "
            f"not '{body.assistant_id}'",
        )
    return JSONResponse(await _make(server, body, thread_id))


@router.post("/runs/crons/search", summary="The crons made over the API")
async def search(request: Request, server: ServerDep) -> JSONResponse:
    body = await read_body(request, CronSearch) or CronSearch()
    found = await service(server).engine.db.aread(
        lambda conn: crons.search(conn, body.assistant_id, body.thread_id, body.limit, body.offset)
    )
    return JSONResponse([shown(cron) for cron in found])


@router.post("/runs/crons/count", summary="How many crons were made over the API")
async def count(request: Request, server: ServerDep) -> int:
    body = await read_body(request, CronSearch) or CronSearch()
    return await service(server).engine.db.aread(
        lambda conn: crons.count(conn, body.assistant_id, body.thread_id)
    )


@router.patch(
    "/runs/crons/{cron_id}", summary="Change a cron's schedule, end, inputs or whether it fires"
)
async def update(request: Request, cron_id: str, server: ServerDep) -> JSONResponse:
    body = await read_body(request, CronPatch) or CronPatch()
    cron = await _cron(server, cron_id)
    payload = dict(cron.payload)
    if body.input is not None:  # checked against the flow as served now (404 if it is gone)
        bundle = server.flow(cron.flow).bundle
        payload.update(input=body.input, inputs=_inputs(server, bundle, body.input))
    if body.metadata is not None:  # shown in the payload as the request gave it
        payload["metadata"] = body.metadata
    changed = crons.ApiCron(
        id=cron.id,
        flow=cron.flow,
        thread_id=cron.thread_id,
        cron=body.schedule if body.schedule is not None else cron.cron,
        timezone=body.timezone if body.timezone is not None else cron.timezone,
        payload=payload,
        metadata=body.metadata if body.metadata is not None else cron.metadata,
        enabled=body.enabled if body.enabled is not None else cron.enabled,
        end_time=_end(body.end_time) if "end_time" in body.model_fields_set else cron.end_time,
        created=cron.created,
        updated=now_iso(),
    )
    _check_schedule(changed.cron, changed.timezone)
    await service(server).engine.db.writer.write(crons.save(changed))
    _wake(server)
    return JSONResponse(shown(changed))


@router.delete("/runs/crons/{cron_id}", summary="Delete a cron", status_code=204)
async def delete(cron_id: str, server: ServerDep) -> Response:
    if not await service(server).engine.db.writer.call(crons.delete(cron_id)):
        raise not_found("cron", f"unknown cron '{cron_id}'")
    _wake(server)
    return Response(status_code=204)


def _sent(body: CronCreate | None) -> CronCreate:
    if body is None:
        raise ApiError(422, "invalid_request", "send the cron as JSON", field="body")
    return body


async def _make(server: Server, body: CronCreate, thread_id: str | None) -> JsonDict:
    if not server.catalog.server.api_crons:
        raise ApiError(
            403,
            "api_crons_off",
            "this yard schedules flows only in Git (server.api_crons: false in blockyard.yaml): "
            "give the flow a `schedule:` instead",
        )
    entry = server.flow(body.assistant_id)  # 404 unknown_flow
    timezone = body.timezone or "UTC"
    _check_schedule(body.schedule, timezone)
    if body.webhook is not None:
        server.webhooks.check(body.webhook, entry.bundle.config.http.allowed_hosts)
    given = body.model_dump(include=set(KEPT), exclude_none=True)
    now = now_iso()
    cron = crons.ApiCron(
        id=new_run_id(),
        flow=entry.name,
        thread_id=thread_id,
        cron=body.schedule,
        timezone=timezone,
        payload={**given, "inputs": _inputs(server, entry.bundle, body.input)},
        metadata=body.metadata or {},
        enabled=body.enabled,
        end_time=_end(body.end_time),
        created=now,
        updated=now,
    )
    await service(server).engine.db.writer.write(crons.save(cron))
    _wake(server)
    return shown(cron)


def _inputs(server: Server, bundle: Bundle, given: JsonDict | None) -> JsonDict:
    """The flow's inputs of the runs, checked now (422 naming the bad one)."""
    inputs = run_inputs(bundle, given)
    service(server).check_inputs(bundle, inputs)
    return inputs


def _check_schedule(cron: str, timezone: str) -> None:
    problem = schedule_problem(ScheduleSpec(cron=cron, timezone=timezone))
    if problem is not None:
        raise ApiError(422, "invalid_schedule", problem, field="schedule")


def _end(value: str | None) -> str | None:
    """`end_time` as ISO-8601 UTC (a time without a zone is UTC); 422 for anything else."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(
            422, "invalid_request", f"end_time '{value}' is not an ISO-8601 time", field="end_time"
        ) from None
    when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


async def _cron(server: Server, cron_id: str) -> crons.ApiCron:
    found = await service(server).engine.db.aread(lambda conn: crons.get(conn, cron_id))
    if found is None:
        raise not_found("cron", f"unknown cron '{cron_id}'")
    return found


def _wake(server: Server) -> None:
    if server.scheduler is not None:  # fire times worked out again now, not at its next round
        server.scheduler.wake()


def shown(cron: crons.ApiCron) -> JsonDict:
    """A cron as LangGraph's server shows one."""
    upcoming = (
        next_fire(ScheduleSpec(cron=cron.cron, timezone=cron.timezone), datetime.now(UTC))
        if cron.enabled
        else None
    )
    return {
        "cron_id": cron.id,
        "assistant_id": cron.flow,
        "thread_id": cron.thread_id,
        "schedule": cron.cron,
        "timezone": cron.timezone,
        "end_time": cron.end_time,
        "enabled": cron.enabled,
        "on_run_completed": None,
        "created_at": iso(cron.created),
        "updated_at": iso(cron.updated),
        "next_run_date": upcoming.isoformat() if upcoming is not None else None,
        "payload": {key: value for key, value in cron.payload.items() if key != "inputs"},
        "metadata": cron.metadata,
        "user_id": None,
    }
