"""Runs: POST /threads/{id}/runs (background), /runs/stream, /runs/wait; GET /threads/{id}/runs, GET
/threads/{id}/runs/{run_id}, /join, /stream (join live, `Last-Event-ID`), POST .../cancel; and the stateless
POST /runs, /runs/stream, /runs/wait (runs without a thread).

A run on a thread is a turn of that conversation thread; `command: {resume: ...}` decides the gate its latest
turn waits at and goes on with that run (the same run id). `multitask_strategy` (double texting) says what a new
turn does while the thread has one going on: `reject` (the default) refuses it, `enqueue` lets it wait for its turn,
`interrupt` stops the turns going on (kept, recorded `interrupted`, resumable as any interrupted run) and then
starts, `rollback` stops them and deletes them (their rows, traces and gates; the thread forgets them) and then
starts. A turn another replica executes is asked to stop through the database (engine/state/backends.py,
`cancel_request`); either way the new turn is admitted only once the thread is free, so one turn runs at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from engine.core.errors import BlockyardError
from engine.core.events import MODEL_CALL, RunStatus, now_iso
from engine.core.usage import Spend
from engine.core.values import JsonDict
from engine.serve.bodies import read_body
from engine.serve.follow import follow
from engine.serve.jobs import Job
from engine.serve.langgraph_api import branching, shapes, state
from engine.serve.langgraph_api.access import ServerDep, busy, find_view, service, view_of
from engine.serve.langgraph_api.bodies import RunCreate, modes
from engine.serve.langgraph_api.interrupts import decision
from engine.serve.langgraph_api.messages import message_input, run_inputs
from engine.serve.langgraph_api.shapes import RUN_STATUS_FILTER, run
from engine.serve.langgraph_api.stream import SUPPORTED_MODES, Resume, Translator, resume_point, sse
from engine.serve.problems import ApiError, conflict, from_engine, not_found
from engine.serve.routes.deps import trace_reader
from engine.serve.server import Server
from engine.serve.sse import HEADERS
from engine.state import retention, threads
from engine.state.store import effective_status
from engine.telemetry.traceparent import HEADER as TRACEPARENT

router = APIRouter(tags=["langgraph: runs"])
DEFAULT_MODES = ("values",)  # what a run streams when its request names no stream_mode
# The stream modes each run started here asked for (the latest RUN_MODES runs): joining its stream without a
# `stream_mode` replays those, as LangGraph's server does; a run it does not know (started before a restart,
# or by Blockyard's own API) streams DEFAULT_MODES.
RUN_MODES = 10_000
_run_modes: OrderedDict[str, tuple[str, ...]] = OrderedDict()


def _remember_modes(run_id: str, asked: list[str]) -> None:
    _run_modes[run_id] = tuple(asked)
    _run_modes.move_to_end(run_id)
    while len(_run_modes) > RUN_MODES:
        _run_modes.popitem(last=False)


def _join_modes(run_id: str, given: list[str]) -> frozenset[str]:
    """The modes a join streams: those asked for (an empty `stream_mode=`, as langgraph-sdk sends for None,
    names none), else the run's own."""
    asked = [mode for mode in given if mode]
    return frozenset(asked or _run_modes.get(run_id, DEFAULT_MODES)) & SUPPORTED_MODES


@dataclass
class Started:
    """A run this request started (or resumed): its job, where its trace stood, how to show its values."""

    job: Job
    thread_id: str | None
    after: int
    translator: Translator


async def _last_seq(server: Server, run_id: str) -> int:
    events = await service(server).events(run_id, 0)
    return events[-1]["seq"] if events else 0


async def start(
    server: Server, thread_id: str | None, body: RunCreate, traceparent: str | None = None
) -> Started:
    """A run of the body's flow (on `thread_id`, created when the body asks), or the resume of the thread's
    waiting gate (`command.resume`): refused, in this order, for what it does not support, a thread of
    another flow, nothing to resume, or a thread busy or waiting."""
    entry = server.flow(body.assistant_id)  # 404 unknown_flow first
    wanted = frozenset(modes(body.stream_mode)) & SUPPORTED_MODES
    view = await _thread_view(server, thread_id, body, entry.name)
    resume = body.command.resume if body.command is not None else None
    if body.command is not None and (
        body.command.goto is not None or body.command.update is not None
    ):
        raise ApiError(
            422,
            "invalid_request",
            "command.goto and command.update are not supported; "
            "command.resume decides a waiting gate",
            field="command",
        )
    if resume is not None:
        return await _resume(server, thread_id, view, body, resume, wanted, entry.name, traceparent)
    point = branching.start_point(view, body)
    inputs = dict(point.again.inputs) if point.again else run_inputs(entry.bundle, body.input)
    if view is not None and thread_id is not None:
        going_on = _admissible(server, thread_id, view, body)
        # also when nothing is seen going on: another server may hold a turn it has not recorded yet
        if body.multitask_strategy in SUPERSEDE and (going_on or server.shares_database):
            rollback = body.multitask_strategy == "rollback"
            await _supersede(server, thread_id, view, rollback=rollback)
    job = await server.start_run(
        entry,
        inputs,
        thread=thread_id,
        traceparent=traceparent,
        webhook=body.webhook,
        branch=point.branch,
    )
    _remember_modes(job.run_id, modes(body.stream_mode))
    before: list[JsonDict] | None
    if view is not None:
        # the talk it goes on from: a failed turn's message is not part of it
        before = state.before_turn(view, point.branch.after)
    else:
        before = [] if message_input(entry.bundle) is not None else None
    translator = Translator(wanted, job.run_id, thread_id, entry.name, job.inputs, before)
    translator.said_by = point.again.id if point.again is not None else None
    return Started(job, thread_id, 0, translator)


async def _thread_view(
    server: Server, thread_id: str | None, body: RunCreate, flow: str
) -> state.ThreadView | None:
    """The view of the run's thread (None: a run without one), made first when the body says
    `if_not_exists: create`; 404 for an unknown one otherwise, 409 for a thread of another flow."""
    if thread_id is None:
        return None
    view = await find_view(server, thread_id)
    if view is None:
        if body.if_not_exists != "create":
            await view_of(server, thread_id)  # 404 unknown_thread, with a hint
        runs = service(server)
        runs.check_thread_id(thread_id)
        await runs.engine.db.writer.call(threads.create(thread_id, flow, now_iso()))
        view = await view_of(server, thread_id)
    if view.thread.flow and view.thread.flow != flow:
        raise conflict(
            "wrong_flow",
            f"thread '{thread_id}' is a conversation with flow '{view.thread.flow}', not '{flow}'",
        )
    return view


async def _resume(
    server: Server,
    thread_id: str | None,
    view: state.ThreadView | None,
    body: RunCreate,
    resume: Any,
    wanted: frozenset[str],
    flow: str,
    traceparent: str | None,
) -> Started:
    """The thread's waiting gate decided by `command.resume`, and its run going on; 409 when nothing waits."""
    if view is None or view.last is None or view.last_status != RunStatus.WAITING:
        raise conflict(
            "not_waiting",
            "nothing to resume: "
            + (
                "a run without a thread has no interrupt"
                if view is None
                else f"thread '{thread_id}' waits for no approval"
            ),
        )
    last = view.last
    asked = decision(resume, view.gates)
    after = await _last_seq(server, last.id)
    job = await server.resume_run(
        last.id, asked, traceparent=traceparent, webhook=body.webhook, thread=thread_id
    )
    _remember_modes(last.id, modes(body.stream_mode))
    # the stream adds the turn's own human message again
    earlier = state.values(view)["messages"][:-1]
    translator = Translator(wanted, last.id, thread_id, flow, dict(last.inputs), earlier)
    translator.said_by = state.origin(view, last).id
    return Started(job, thread_id, after, translator)


def _admissible(server: Server, thread_id: str, view: state.ThreadView, body: RunCreate) -> bool:
    """409 for a new turn on a thread that waits at a gate, or that has one going on under `reject`;
    whether it has one going on."""
    if view.last_status == RunStatus.WAITING:
        raise conflict(
            "thread_waiting",
            f"thread '{thread_id}' waits for an approval: resume it with command: {{resume: ...}}",
        )
    going_on = busy(server, thread_id) or view.last_status == RunStatus.RUNNING
    if going_on and body.multitask_strategy == "reject":
        raise conflict(
            "thread_busy",
            f"thread '{thread_id}' has a run going on; wait for it, or send "
            "multitask_strategy: enqueue, interrupt or rollback",
        )
    return going_on


SUPERSEDE = ("interrupt", "rollback")  # the strategies that stop the turns going on
STOP_WAIT = 30.0  # seconds a turn another replica executes has to stop once asked


async def _supersede(
    server: Server, thread_id: str, view: state.ThreadView, *, rollback: bool
) -> None:
    """Stop the thread's turns going on, each recorded `interrupted` before this returns (409
    `thread_busy` for one that did not stop within STOP_WAIT); with `rollback`, then delete them."""
    strategy = "rollback" if rollback else "interrupt"
    reason = f"interrupted by a newer turn of thread '{thread_id}' (multitask_strategy: {strategy})"
    before = now_iso()
    stopped = [job.run_id for job in server.thread_jobs(thread_id)]
    for run_id in stopped:  # the turns this server holds: each recorded once cancel_one returns
        with contextlib.suppress(ApiError):  # it ended meanwhile
            await cancel_one(server, thread_id, run_id, wait=True, reason=reason)
    # the turns other servers hold, running or waiting for the thread's turn (Postgres)
    asked = await server.ask_cancel_turns(thread_id, before, reason)
    last = view.last
    if last is not None and view.last_status == RunStatus.RUNNING and last.id not in stopped:
        # the turn running on another server (or process): asked above; recorded stopped before this goes on
        if not asked or not await _stopped(server, last.id):
            raise conflict("thread_busy", f"run {last.id} {_not_stopped(asked)}")
        stopped.append(last.id)
    if rollback and stopped:
        await roll_back(server, thread_id, stopped)


async def _stop_elsewhere(server: Server, run_id: str, reason: str, code: str) -> None:
    """Stop a run another server (or process) executes, and wait until it is recorded stopped: 409
    `code` when it cannot be asked (a SQLite file's other process) or did not stop within STOP_WAIT."""
    asked = await server.ask_cancel(run_id, reason)
    if not asked or not await _stopped(server, run_id):
        raise conflict(code, f"run {run_id} {_not_stopped(asked)}")


def _not_stopped(asked: bool) -> str:
    if asked:
        return f"did not stop within {STOP_WAIT:.0f} s of being asked"
    return "runs in another process, which a server on a SQLite database cannot ask to stop"


async def roll_back(server: Server, thread_id: str | None, run_ids: list[str]) -> None:
    """Delete runs a rollback stopped, those recorded interrupted (one that finished as it was asked to
    stop won the race, and stays): a thread's turns as the thread forgets them; a run without a thread
    with its trace, checkpoints and gates (engine/state/retention.py)."""
    writer = service(server).engine.db.writer
    if thread_id is not None:
        await writer.call(threads.roll_back(thread_id, run_ids))
    else:
        await writer.call(
            retention.deleting(run_ids, whole=True, statuses=(RunStatus.INTERRUPTED,))
        )


async def _stopped(server: Server, run_id: str) -> bool:
    """Whether run `run_id` stopped running (recorded ended, or its owner died) within STOP_WAIT."""
    deadline = asyncio.get_running_loop().time() + STOP_WAIT
    pause = 0.02
    while True:
        # its status as shown: a dead owner's run is not running
        record = await service(server).get_run(run_id)
        if record is None or record["status"] != RunStatus.RUNNING:
            return True
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.25)


def _where(thread_id: str | None, run_id: str) -> str:
    return f"/threads/{thread_id}/runs/{run_id}" if thread_id else f"/runs/{run_id}"


def _stream(
    server: Server,
    started: Started,
    resume: Resume | None = None,
    fresh: bool = True,
    headers: dict[str, str] | None = None,
) -> EventSourceResponse:
    return EventSourceResponse(
        stream_messages(server, started, resume, fresh),
        ping=server.settings.sse_ping,
        headers={**HEADERS, **(headers or {})},
    )


async def stream_messages(
    server: Server, started: Started, resume: Resume | None = None, fresh: bool = True
) -> AsyncIterator[ServerSentEvent]:
    """One run's SSE messages, until it ends or pauses (also what a thread's stream sends of each of its runs)."""
    job_id = started.translator.run_id
    after = resume.after if resume else started.after
    events = follow(
        job_id,
        after,
        server.broker,
        trace_reader(server),
        until_pause=True,
        poll=server.settings.poll,
    )
    if fresh:
        yield started.translator.metadata()
    if after > 0:  # the reply's usage counts the model calls before the events this stream follows
        started.translator.spent = await _spent_until(server, job_id, after)
    async for event in events:
        for message in started.translator.messages_of(event, resume):
            yield message
    if started.job is not None and started.job.result.done() and not started.job.result.cancelled():
        problem = started.job.result.exception()
        if problem is not None:
            shown = (
                from_engine(problem)
                if isinstance(problem, BlockyardError)
                else ApiError(500, "internal", str(problem))
            )
            yield sse("error", {"error": shown.code, "message": shown.message})


async def _spent_until(server: Server, run_id: str, seq: int) -> Spend:
    """What the run's model calls up to event `seq` spent (its model_call events in the trace)."""
    spent = Spend()
    for event in await service(server).events(run_id, 0):
        if event["type"] == MODEL_CALL and event["seq"] <= seq:
            spent.add(event["data"])
    return spent


def _stream_headers(started: Started) -> dict[str, str]:
    where = _where(started.thread_id, started.translator.run_id)
    found = {"Content-Location": where}
    if started.thread_id is not None:
        query = urlencode([("stream_mode", mode) for mode in sorted(started.translator.modes)])
        found["Location"] = f"{where}/stream" + (f"?{query}" if query else "")
    return found


async def _final(server: Server, started: Started) -> JsonDict:
    """What /runs/wait and /join answer: the values once the run ended or paused (`__interrupt__` at a gate,
    `__error__` when it failed)."""
    try:
        result: JsonDict = await asyncio.shield(started.job.result)
    except BlockyardError as exc:
        raise from_engine(exc) from None
    return await _values_after(server, started.thread_id, result, started.translator)


async def _values_after(
    server: Server, thread_id: str | None, result: JsonDict, translator: Translator | None
) -> JsonDict:
    status = result.get("status")
    if thread_id is not None:
        view = await view_of(server, thread_id)
        found = state.values(view)
        if status == RunStatus.WAITING:
            found["__interrupt__"] = state.interrupts(view)
    else:
        assert translator is not None
        # the reply's usage: the run's totals
        stored = await service(server).get_run(translator.run_id)
        found = translator.values(
            result.get("outputs") if status == RunStatus.FINISHED else None,
            Spend.of(stored) if stored is not None else None,
        )
    if status in (RunStatus.FAILED, RunStatus.INTERRUPTED):
        found["__error__"] = {
            "error": "RunFailed" if status == RunStatus.FAILED else "RunInterrupted",
            "message": str(result.get("error") or status),
        }
    return found


# ---- creating runs ------------------------------------------------------------------------------


def _traceparent(request: Request) -> str | None:
    """The caller's W3C trace, which the run's trace continues (engine/telemetry; an invalid one is ignored)."""
    return request.headers.get(TRACEPARENT)


async def _body(request: Request) -> RunCreate:
    body = await read_body(request, RunCreate)
    if body is None:
        raise ApiError(
            422, "invalid_request", 'the body must name the assistant: {"assistant_id": "FLOW"}'
        )
    return body


@router.post("/threads/{thread_id}/runs", summary="Start a run on a thread in the background")
async def create(thread_id: str, request: Request, server: ServerDep) -> JSONResponse:
    started = await start(server, thread_id, await _body(request), _traceparent(request))
    return await _created(server, started)


@router.post("/runs", summary="Start a run without a thread in the background")
async def create_stateless(request: Request, server: ServerDep) -> JSONResponse:
    return await _created(
        server, await start(server, None, await _body(request), _traceparent(request))
    )


async def _created(server: Server, started: Started) -> JSONResponse:
    return JSONResponse(
        await created_run(server, started),
        headers={"Content-Location": _where(started.thread_id, started.translator.run_id)},
    )


async def created_run(server: Server, started: Started) -> shapes.Run:
    """The run a request started, as LangGraph shows it (`pending` or `running`)."""
    job = started.job
    shown = job.summary()
    if (
        job.kind == "start"
        and job.thread is not None
        and await service(server).get_run(job.run_id) is None
    ):
        shown = _held(job)  # a turn not yet admitted (one before it goes on): pending
    return run({**shown, "id": started.translator.run_id}, started.thread_id)


@router.post(
    "/threads/{thread_id}/runs/stream",
    summary="Start a run on a thread and stream it",
    response_model=None,
)
async def create_stream(thread_id: str, request: Request, server: ServerDep) -> Response:
    started = await start(server, thread_id, await _body(request), _traceparent(request))
    return _stream(server, started, headers=_stream_headers(started))


@router.post(
    "/runs/stream", summary="Start a run without a thread and stream it", response_model=None
)
async def create_stream_stateless(request: Request, server: ServerDep) -> Response:
    started = await start(server, None, await _body(request), _traceparent(request))
    return _stream(server, started, headers=_stream_headers(started))


@router.post(
    "/threads/{thread_id}/runs/wait", summary="Start a run on a thread and wait for its values"
)
async def create_wait(thread_id: str, request: Request, server: ServerDep) -> JSONResponse:
    started = await start(server, thread_id, await _body(request), _traceparent(request))
    where = _where(thread_id, started.translator.run_id)
    return JSONResponse(
        await _final(server, started),
        headers={"Content-Location": where, "Location": f"{where}/join"},
    )


@router.post("/runs/wait", summary="Start a run without a thread and wait for its values")
async def create_wait_stateless(request: Request, server: ServerDep) -> JSONResponse:
    started = await start(server, None, await _body(request), _traceparent(request))
    return JSONResponse(
        await _final(server, started),
        headers={"Content-Location": _where(None, started.translator.run_id)},
    )


# ---- reading, joining, cancelling ---------------------------------------------------------------


def _held(job: Job) -> JsonDict:
    """A run this server holds that has no row yet: a turn waiting for a slot, or for the thread's turn before it
    to end (`enqueue`) — `pending` (the job itself is `running` while it waits for the thread)."""
    return {**job.summary(), "status": RunStatus.QUEUED}


async def run_of(server: Server, thread_id: str, run_id: str) -> shapes.Run:
    """The run as LangGraph shows it; 404 unless it is a run of that thread."""
    await view_of(server, thread_id)
    queue = server.queue
    job = queue.jobs.get(run_id) if queue is not None else None
    stored = await service(server).get_run(run_id)
    if stored is not None and stored.get("thread_id") == thread_id:
        if job is not None and job.state == RunStatus.QUEUED:
            stored["status"] = RunStatus.QUEUED
        return run(stored, thread_id)
    if stored is None and job is not None and job.thread == thread_id:
        return run(_held(job), thread_id)
    raise not_found("run", f"thread '{thread_id}' has no run '{run_id}'")


@router.get(
    "/threads/{thread_id}/runs", summary="The thread's runs, newest first", response_model=None
)
async def list_runs(
    thread_id: str,
    server: ServerDep,
    limit: int = Query(10, ge=1, le=1000),
    offset: int = Query(0, ge=0),
    status: str | None = None,
) -> list[shapes.Run]:
    view = await view_of(server, thread_id)
    if status is not None and status not in RUN_STATUS_FILTER:
        raise ApiError(
            422,
            "invalid_request",
            f"unknown status '{status}'; use one of: {', '.join(RUN_STATUS_FILTER)}",
            field="status",
        )
    records = sorted(
        [*view.runs, *view.cancelled], key=lambda r: (r.started or r.created, r.id), reverse=True
    )
    recorded = {record.id for record in records}
    pending = [
        _held(job)
        for job in server.thread_jobs(thread_id)
        if job.kind == "start" and job.run_id not in recorded
    ]
    stored = [record.as_dict() | {"status": effective_status(record)} for record in records]
    rows = [run(row, thread_id) for row in [*pending, *stored]]
    if status is not None:
        rows = [row for row in rows if row["status"] == status]
    return rows[offset : offset + limit]


@router.get(
    "/threads/{thread_id}/runs/{run_id}", summary="One run of the thread", response_model=None
)
async def get_run(thread_id: str, run_id: str, server: ServerDep) -> shapes.Run:
    return await run_of(server, thread_id, run_id)


@router.get(
    "/threads/{thread_id}/runs/{run_id}/join",
    summary="Wait for the run to end or pause; its values",
)
async def join(thread_id: str, run_id: str, server: ServerDep) -> JsonDict:
    shown = await run_of(server, thread_id, run_id)
    job = server.queue.jobs.get(run_id) if server.queue is not None else None
    if job is not None:
        try:
            result: JsonDict = await asyncio.shield(job.result)
        except BlockyardError as exc:
            raise from_engine(exc) from None
    else:
        stored = await service(server).get_run(run_id) or {}
        result = {
            "status": stored.get("status", shown["status"]),
            "error": stored.get("error"),
            "outputs": stored.get("outputs"),
        }
    return await _values_after(server, thread_id, result, None)


@router.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    summary="Join a run's stream (Last-Event-ID resumes)",
    response_model=None,
)
async def join_stream(
    thread_id: str,
    run_id: str,
    request: Request,
    server: ServerDep,
    stream_mode: list[str] = Query(default_factory=list),
) -> Response:
    await run_of(server, thread_id, run_id)
    resume = resume_point(request)
    started = await joined(server, thread_id, run_id, stream_mode)
    return _stream(server, started, resume, fresh=resume is None)


async def joined(server: Server, thread_id: str, run_id: str, stream_mode: list[str]) -> Started:
    """What joining a run of the thread follows: its job (a settled stand-in for a run this server does not
    hold) and a translator for the modes asked for, else the run's own."""
    view = await view_of(server, thread_id)
    record = next((r for r in view.runs if r.id == run_id), None)
    inputs = dict(record.inputs) if record is not None else {}
    if record is None and server.queue is not None and run_id in server.queue.jobs:
        inputs = dict(server.queue.jobs[run_id].inputs)
    # the talk it went on from; for a turn the server holds whose row is not recorded yet (its stream joined
    # as it starts), the thread's latest — as a replay of its stream, once it is recorded, will say
    before = (
        state.talk_before(view, record) if record is not None else state.before_turn(view, None)
    )
    translator = Translator(
        _join_modes(run_id, stream_mode),
        run_id,
        thread_id,
        record.flow if record is not None else view.thread.flow,
        inputs,
        before,
    )
    if record is not None:
        translator.said_by = state.origin(view, record).id
    job = server.queue.jobs.get(run_id) if server.queue is not None else None
    return Started(job if job is not None else _settled_job(), thread_id, 0, translator)


def _settled_job() -> Job:
    job = Job("", "", 0, "start", {})
    job.result.set_result({})
    return job


@router.post(
    "/threads/{thread_id}/runs/{run_id}/cancel",
    summary="Cancel a queued or running run",
    response_model=None,
)
async def cancel(
    thread_id: str, run_id: str, server: ServerDep, wait: bool = False, action: str = "interrupt"
) -> Response:
    await run_of(server, thread_id, run_id)
    check_cancel_action(action)
    if action == "rollback":  # stopped, then deleted: waited for either way
        await cancel_one(server, thread_id, run_id, True, "cancelled by a client (rollback)")
        await roll_back(server, thread_id, [run_id])
        return Response(status_code=204)
    await cancel_one(server, thread_id, run_id, wait)
    return Response(status_code=204 if wait else 202)


def check_cancel_action(action: str) -> None:
    """422 for an action other than `interrupt` (the run kept, interrupted and resumable) and `rollback`
    (the run deleted once it stopped)."""
    if action not in ("interrupt", "rollback"):
        raise ApiError(
            422,
            "invalid_request",
            f"unknown action '{action}': use interrupt or rollback",
            field="action",
        )


async def cancel_one(
    server: Server,
    thread_id: str | None,
    run_id: str,
    wait: bool,
    reason: str = "cancelled by a client",
) -> None:
    """Stop a run this server holds, or one another server executes (asked through the database; 409
    `not_running` when it cannot be asked, or for a run that is not going on); a turn of `thread_id`
    still waiting for the thread's turn before it is recorded `interrupted`."""
    job = server.queue.jobs.get(run_id) if server.queue is not None else None
    if job is None:
        record = await service(server).get_run(run_id)
        if record is not None and record["status"] == RunStatus.RUNNING:
            if wait:
                await _stop_elsewhere(server, run_id, reason, "not_running")
            elif not await server.ask_cancel(run_id, reason):
                raise conflict("not_running", f"run {run_id} {_not_stopped(False)}")
            return
    unadmitted = (
        job is not None
        and job.kind == "start"
        and job.thread is not None
        and await service(server).get_run(run_id) is None
    )
    # a turn still waiting for its turn stops at once; waited for, so that it is recorded when this answers
    await server.cancel_run(run_id, wait=wait or unadmitted, reason=reason)
