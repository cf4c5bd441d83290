"""Conversation threads over HTTP: POST /threads, GET /threads, GET /threads/{id}, GET
/threads/{id}/history, POST /threads/{id}/runs (a turn), DELETE /threads/{id}.

A turn is a run of the thread's flow, started as `POST /flows/{name}/runs` starts one, with the
same three answers (wait, `?wait=false`, `Accept: text/event-stream`); the runtime admits it once
no other turn of the thread goes on (engine/state/threads.py). Its stream opens with a `thread_id`
message and closes with `complete`, which carries the reply. The conversation is read from the
messages table (engine/state/messages.py), never from checkpoints. See docs/serve.md.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import ServerSentEvent

from engine.core.diagnostics import did_you_mean
from engine.core.errors import BlockyardError
from engine.core.events import RunStatus
from engine.core.values import JsonDict
from engine.serve.bodies import ThreadRequest, TurnRequest, openapi_body, read_body
from engine.serve.follow import follow
from engine.serve.jobs import Job
from engine.serve.problems import ApiError, conflict, from_engine, not_found
from engine.serve.routes.deps import get_server, trace_reader
from engine.serve.run_service import RunService
from engine.serve.server import Server
from engine.serve.sse import named, stream, wants_stream
from engine.state import threads
from engine.state.messages import MAX_PAGE, PAGE, Message
from engine.telemetry.traceparent import HEADER as TRACEPARENT

router = APIRouter(tags=["threads"])
ServerDep = Annotated[Server, Depends(get_server)]


def _service(server: Server) -> RunService:
    if server.service is None:
        raise ApiError(503, "starting", "the server is starting")
    return server.service


def _links(thread_id: str) -> dict[str, str]:
    base = f"/threads/{thread_id}"
    return {"thread": base, "history": f"{base}/history", "runs": f"{base}/runs"}


def _shown(thread: JsonDict) -> JsonDict:
    return {**thread, "links": _links(thread["id"])}


def message_dict(message: Message) -> JsonDict:
    """A message as the API shows it: the reply links to the run (and trace) that made it."""
    return {
        "index": message.index,
        "role": message.role,
        "content": message.content,
        "run_id": message.run_id,
        "created": message.created,
        "links": {"run": f"/runs/{message.run_id}", "events": f"/runs/{message.run_id}/events"},
    }


async def _thread(server: Server, thread_id: str) -> JsonDict:
    service = _service(server)
    found = await service.get_thread(thread_id)
    if found is None:
        hint = did_you_mean(thread_id, await service.thread_ids())
        raise not_found("thread", f"unknown thread '{thread_id}'{hint}")
    return found


@router.post(
    "/threads",
    summary="Create a conversation thread (before its first turn)",
    status_code=201,
    response_model=None,
    openapi_extra=openapi_body(ThreadRequest),
)
async def create_thread(request: Request, server: ServerDep) -> JSONResponse:
    service = _service(server)
    body = await read_body(request, ThreadRequest) or ThreadRequest()
    thread_id = service.check_thread_id(body.id) if body.id is not None else service.new_run_id()
    if body.flow is not None:
        server.flow(body.flow)  # 404 unknown_flow, with a did-you-mean hint
    made = await service.create_thread(thread_id, body.flow)
    if made is None:
        raise conflict("thread_exists", f"thread id '{thread_id}' is already taken")
    return JSONResponse(
        _shown(made), status_code=201, headers={"Location": f"/threads/{thread_id}"}
    )


@router.get("/threads", summary="Conversation threads, most recently active first")
async def list_threads(
    server: ServerDep, flow: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> JsonDict:
    found = await _service(server).list_threads(flow=flow, limit=limit)
    return {"threads": [_shown(thread) for thread in found]}


@router.get("/threads/{thread_id}", summary="One thread: its flow, name, turns, last activity")
async def get_thread(thread_id: str, server: ServerDep) -> JsonDict:
    return _shown(await _thread(server, thread_id))


@router.get(
    "/threads/{thread_id}/history",
    summary="A page of a thread's conversation, oldest first",
    description="From the start by default; `after=N`: the messages after index N; `before=N` (or "
    "`newest=true`): the last `limit` messages before index N (or of all), still oldest first.",
)
async def thread_history(
    thread_id: str,
    server: ServerDep,
    after: Annotated[int | None, Query(ge=-1, le=2**62)] = None,
    before: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    newest: bool = False,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = PAGE,
) -> JsonDict:
    if after is not None and (before is not None or newest):
        raise ApiError(422, "invalid_request", "give `after` or `before` (or `newest`), not both")
    await _thread(server, thread_id)
    page, total = await _service(server).history(
        thread_id, after=after, before=before, newest=newest, limit=limit
    )
    base = f"/threads/{thread_id}/history"
    more_after = bool(page) and page[-1].index < total - 1
    more_before = bool(page) and page[0].index > 0
    return {
        "thread_id": thread_id,
        "messages": [message_dict(m) for m in page],
        "total": total,
        "links": {
            "next": f"{base}?after={page[-1].index}&limit={limit}" if more_after else None,
            "prev": f"{base}?before={page[0].index}&limit={limit}" if more_before else None,
        },
    }


@router.post(
    "/threads/{thread_id}/runs",
    summary="Take the next turn of a conversation",
    description="Runs the thread's flow (or the body's `flow` while the thread has none) with the turn's "
    "inputs. Waits for the turn to finish or pause by default; `?wait=false` answers 202 at "
    "once; `Accept: text/event-stream` streams `thread_id`, the run's events (`token`s, "
    "`thread_name` on the first turn) and `complete` with the reply.",
    response_model=None,
    openapi_extra=openapi_body(TurnRequest),
)
async def take_turn(
    thread_id: str,
    request: Request,
    server: ServerDep,
    wait: Annotated[bool, Query(description="Wait for the turn to finish or pause.")] = True,
) -> Response:
    thread = await _thread(server, thread_id)  # an unknown thread is a 404 whatever the body says
    body = await read_body(request, TurnRequest) or TurnRequest()
    flow = thread["flow"] or body.flow
    if flow is None:
        raise ApiError(
            422,
            "invalid_request",
            f'thread \'{thread_id}\' has no flow yet: name one in the body ("flow": "NAME")',
            field="flow",
        )
    if body.flow is not None and body.flow != flow:
        raise conflict(
            "wrong_flow",
            f"thread '{thread_id}' is a conversation with flow '{flow}', not '{body.flow}'",
        )
    entry = server.flow(flow)
    if thread["last_status"] == RunStatus.WAITING:
        raise conflict(
            "thread_waiting",
            f"thread '{thread_id}' waits for an approval in run {thread['last_run']}: "
            f"decide it first (POST /runs/{thread['last_run']}/resume)",
        )
    job = await server.start_run(
        entry,
        body.inputs,
        body.run_id,
        thread=thread_id,
        traceparent=request.headers.get(TRACEPARENT),
    )
    service = _service(server)
    if wants_stream(request):
        events = follow(
            job.run_id,
            0,
            server.broker,
            trace_reader(server),
            until_pause=True,
            poll=server.settings.poll,
        )
        opening = named(
            "thread_id", {"thread_id": thread_id, "run_id": job.run_id, "flow": job.flow}
        )
        return stream(
            events,
            ping=server.settings.sse_ping,
            prologue=[opening],
            epilogue=lambda: _complete(service, job, thread_id),
        )
    if not wait:
        return JSONResponse(
            {
                "run_id": job.run_id,
                "thread_id": thread_id,
                "status": job.state,
                "flow": job.flow,
                "version": job.version,
                "links": {
                    "run": f"/runs/{job.run_id}",
                    "events": f"/runs/{job.run_id}/events",
                    **_links(thread_id),
                },
            },
            status_code=202,
        )
    # a client that hangs up must not cancel the turn
    result: JsonDict = await asyncio.shield(job.result)
    return JSONResponse(await _answer(service, result, thread_id))


async def _answer(service: RunService, result: JsonDict, thread_id: str) -> JsonDict:
    """How a turn ended, with its reply: the message it added to the conversation once it finished."""
    added = (
        await service.turn_messages(result["run_id"])
        if result["status"] == RunStatus.FINISHED
        else []
    )
    reply = next((m for m in added if m.role == "assistant"), None)
    text = (
        reply.content
        if reply is not None
        else threads.reply_text(result.get("outputs"))
        if result["status"] == RunStatus.FINISHED
        else None
    )
    return {
        **result,
        "thread_id": thread_id,
        "reply": text,
        "message": message_dict(reply) if reply is not None else None,
    }


async def _complete(service: RunService, job: Job, thread_id: str) -> JsonDict | ServerSentEvent:
    """The last message of a turn's stream: `complete` with the answer, or `error` when the turn was refused."""
    try:
        result: JsonDict = await asyncio.shield(job.result)
    except BlockyardError as exc:
        problem = from_engine(exc)
        return {"code": problem.code, "message": problem.message, "run_id": job.run_id}
    except Exception as exc:  # a bug: the server log has it (engine/serve/jobs.py)
        return {"code": "internal", "message": str(exc), "run_id": job.run_id}
    return named("complete", await _answer(service, result, thread_id))


@router.delete(
    "/threads/{thread_id}",
    summary="Delete a thread: its messages and checkpoints; the id is free again",
    status_code=204,
    response_model=None,
)
async def delete_thread(thread_id: str, server: ServerDep) -> Response:
    service = _service(server)
    await _thread(server, thread_id)
    held = server.thread_jobs(thread_id)
    if held:
        raise conflict(
            "thread_busy",
            f"thread '{thread_id}' has a turn {held[0].state} in this server "
            f"(run {held[0].run_id}); delete it once the turn is over",
        )
    outcome = await service.delete_thread(thread_id)
    if outcome is False:
        raise not_found("thread", f"unknown thread '{thread_id}'")
    if isinstance(outcome, threads.Busy):
        if outcome.status == RunStatus.WAITING:
            raise conflict(
                "thread_busy",
                f"thread '{thread_id}' waits for an approval in run {outcome.run_id}: "
                "decide it first",
            )
        raise conflict(
            "thread_busy",
            f"thread '{thread_id}' has a turn running (run {outcome.run_id}); "
            "delete it once the turn is over",
        )
    return Response(status_code=204)
