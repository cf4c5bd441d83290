"""Threads: POST /threads, POST /threads/search, /threads/count, GET/PATCH/DELETE /threads/{id},
GET /threads/{id}/state (and a past one by checkpoint id), POST /threads/{id}/state (updates.py), GET and
POST /threads/{id}/history, POST /threads/{id}/copy.

A thread is a Blockyard conversation thread (engine/state/threads.py); its state is read by state.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from engine.core.events import RunStatus, now_iso
from engine.core.values import JsonDict
from engine.serve.bodies import read_body
from engine.serve.langgraph_api import shapes, state, updates
from engine.serve.langgraph_api.access import (
    ServerDep,
    busy,
    check_free,
    find_view,
    held,
    service,
    view_of,
)
from engine.serve.langgraph_api.bodies import (
    CheckpointRequest,
    HistoryRequest,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
)
from engine.serve.problems import ApiError, conflict, not_found
from engine.serve.server import Server
from engine.state import thread_copy, threads
from engine.state.database import Connection

router = APIRouter(tags=["langgraph: threads"])
SEARCHED = 1000  # most threads one search looks through
# Most bytes (as UTF-8 JSON) a thread's metadata takes: what a request gives and what PATCHes merge into
# it; a search answers at most `limit` (1000) threads, so its metadata stays within 1000 times this
METADATA_BYTES = 64 * 1024


def _metadata_limit(server: Server) -> int:
    return min(METADATA_BYTES, server.catalog.server.max_input_bytes)


def _check_metadata(server: Server, metadata: JsonDict | None, what: str) -> None:
    """413 `metadata_too_large` when `metadata` takes more than the limit as JSON."""
    if metadata:
        size = json_size(metadata)
        if size > _metadata_limit(server):
            raise _too_large(server, what, size)


def _too_large(server: Server, what: str, size: int) -> ApiError:
    return ApiError(
        413,
        "metadata_too_large",
        f"{what} takes {size} bytes as JSON; a thread's metadata takes at "
        f"most {_metadata_limit(server)} (docs/langgraph-api.md)",
    )


def json_size(value: Any) -> int:
    return len(
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode(
            "utf-8", "backslashreplace"
        )
    )


def _merge(thread_id: str, metadata: JsonDict, limit: int) -> Callable[[Connection], int | None]:
    """A writer call: add `metadata` to the thread's (threads.merge_metadata) unless the merged metadata would
    take more than `limit` bytes; None when it was merged (or there is no such thread: the caller checked),
    else the merged size. Read and written in the writer's one transaction, so PATCHes at once stay bounded."""

    def apply(conn: Connection) -> int | None:
        merged = {**threads.metadata_of(conn, [thread_id]).get(thread_id, {}), **metadata}
        size = json_size(merged)
        if size > limit:
            return size
        threads.merge_metadata(thread_id, metadata)(conn)
        return None

    return apply


async def shown(server: Server, thread_id: str) -> shapes.Thread:
    return state.thread(await view_of(server, thread_id), busy(server, thread_id))


@router.post("/threads", summary="Create a thread (if_exists: raise or do_nothing)")
async def create(request: Request, server: ServerDep) -> JSONResponse:
    body = await read_body(request, ThreadCreate) or ThreadCreate()
    _check_metadata(server, body.metadata, "the thread's metadata")
    runs = service(server)
    thread_id = (
        runs.check_thread_id(body.thread_id) if body.thread_id is not None else runs.new_run_id()
    )
    flow = body.graph_id
    if flow is not None:
        server.flow(flow)
    else:  # langgraph-sdk sends `threads.create(graph_id=...)` as the metadata's graph_id
        named = (body.metadata or {}).get("graph_id")
        flow = named if isinstance(named, str) and server.catalog.flow(named) is not None else None
    made = await runs.engine.db.writer.call(
        threads.create(thread_id, flow, now_iso(), body.metadata)
    )
    if made is None and body.if_exists == "raise":
        raise conflict("thread_exists", f"thread id '{thread_id}' is already taken")
    return JSONResponse(
        await shown(server, thread_id), headers={"Content-Location": f"/threads/{thread_id}"}
    )


async def _search(server: Server, body: ThreadSearch) -> list[shapes.Thread]:
    runs = service(server)
    listed = await runs.list_threads(flow=None, limit=SEARCHED)
    ids = [found["id"] for found in listed if body.ids is None or found["id"] in body.ids]
    views = [
        view
        for view in [await find_view(server, thread_id) for thread_id in ids]
        if view is not None
    ]
    found = [state.thread(view, busy(server, view.thread.id)) for view in views]

    def wanted(thread: shapes.Thread) -> bool:
        if body.status is not None and thread["status"] != body.status:
            return False
        if any(
            thread["metadata"].get(key) != value for key, value in (body.metadata or {}).items()
        ):
            return False
        return all(thread["values"].get(key) == value for key, value in (body.values or {}).items())

    found = [thread for thread in found if wanted(thread)]
    if body.sort_by is not None:
        found.sort(
            key=lambda thread: str(thread.get(body.sort_by or "updated_at")),
            reverse=body.sort_order != "asc",
        )
    return found


@router.post(
    "/threads/search",
    summary="Threads, most recently active first, filtered by metadata, values, status",
    response_model=None,
)
async def search(request: Request, server: ServerDep) -> list[shapes.Thread]:
    body = await read_body(request, ThreadSearch) or ThreadSearch()
    return (await _search(server, body))[body.offset : body.offset + body.limit]


@router.post("/threads/count", summary="How many threads match")
async def count(request: Request, server: ServerDep) -> int:
    body = await read_body(request, ThreadSearch) or ThreadSearch()
    return len(await _search(server, body))


@router.get(
    "/threads/{thread_id}",
    summary="One thread: status, metadata, values, interrupts",
    response_model=None,
)
async def get(thread_id: str, server: ServerDep) -> shapes.Thread:
    return await shown(server, thread_id)


@router.patch("/threads/{thread_id}", summary="Add to a thread's metadata", response_model=None)
async def patch(thread_id: str, request: Request, server: ServerDep) -> shapes.Thread:
    await view_of(server, thread_id)
    body = await read_body(request, ThreadPatch) or ThreadPatch()
    _check_metadata(server, body.metadata, "the metadata to add")
    size = await service(server).engine.db.writer.call(
        _merge(thread_id, body.metadata, _metadata_limit(server))
    )
    if size is not None:
        raise _too_large(server, "the thread's metadata with these keys added", size)
    return await shown(server, thread_id)


@router.delete(
    "/threads/{thread_id}",
    summary="Delete a thread: its messages and checkpoints",
    status_code=204,
    response_model=None,
)
async def delete(thread_id: str, server: ServerDep) -> Response:
    await view_of(server, thread_id)
    await remove(server, thread_id)
    return Response(status_code=204)


@router.post(
    "/threads/{thread_id}/state",
    summary="Write the thread's messages: recorded as turns, never changed in place",
)
async def update_state(thread_id: str, request: Request, server: ServerDep) -> JsonDict:
    view = await view_of(server, thread_id)
    body = await read_body(request, updates.StateUpdate) or updates.StateUpdate()
    return await updates.update(server, view, body)


@router.post(
    "/threads/{thread_id}/copy",
    summary="Copy a thread: its conversation and every branch, to go on apart from it",
    response_model=None,
)
async def copy(thread_id: str, server: ServerDep) -> shapes.Thread:
    await view_of(server, thread_id)  # 404 unknown_thread, with a hint
    check_free(server, thread_id, "copy it")
    runs = service(server)
    new_id = runs.new_run_id()
    outcome = await runs.engine.db.writer.call(thread_copy.copy(thread_id, new_id, now_iso()))
    if outcome is None:
        raise not_found("thread", f"unknown thread '{thread_id}'")
    if isinstance(outcome, threads.Busy):
        raise held(thread_id, outcome, "copy it")
    return await shown(server, new_id)


async def remove(server: Server, thread_id: str) -> None:
    """Delete the thread's messages and checkpoints; 409 `thread_busy` while a run of it is going on or waits."""
    if busy(server, thread_id):
        raise conflict(
            "thread_busy",
            f"thread '{thread_id}' has a run queued or running; delete it once it is over",
        )
    outcome = await service(server).delete_thread(thread_id)
    if outcome is False:
        raise not_found("thread", f"unknown thread '{thread_id}'")
    if isinstance(outcome, threads.Busy):
        waits = outcome.status == RunStatus.WAITING
        raise conflict(
            "thread_busy",
            f"thread '{thread_id}' "
            + (
                f"waits for an approval in run {outcome.run_id}: resume it first"
                if waits
                else f"has a run going on (run {outcome.run_id}); delete it once it is over"
            ),
        )


@router.get(
    "/threads/{thread_id}/state",
    summary="The thread's state: values, next, tasks and their interrupts",
    response_model=None,
)
async def get_state(
    thread_id: str, server: ServerDep, subgraphs: bool = False
) -> shapes.ThreadState:
    return state.state(await view_of(server, thread_id))


def _at(view: state.ThreadView, checkpoint_id: str) -> shapes.ThreadState:
    found = state.at(view, checkpoint_id)
    if found is None:
        raise not_found(
            "checkpoint",
            f"thread '{view.thread.id}' has no checkpoint '{checkpoint_id}' (a checkpoint id is "
            f"the id of one of its turns, for the state after it; that id and '{state.INPUT}' for "
            f"the turn's input; '{state.START}' for the state before every turn)",
        )
    return found


@router.get(
    "/threads/{thread_id}/state/{checkpoint_id}",
    summary="The thread's state after one of its runs",
    response_model=None,
)
async def get_state_at(thread_id: str, checkpoint_id: str, server: ServerDep) -> shapes.ThreadState:
    return _at(await view_of(server, thread_id), checkpoint_id)


@router.post(
    "/threads/{thread_id}/state/checkpoint",
    summary="The thread's state after one of its runs",
    response_model=None,
)
async def post_state_at(thread_id: str, request: Request, server: ServerDep) -> shapes.ThreadState:
    view = await view_of(server, thread_id)
    body = await read_body(request, CheckpointRequest)
    checkpoint_id = body.checkpoint.get("checkpoint_id") if body is not None else None
    if not isinstance(checkpoint_id, str):
        return state.state(view)
    return _at(view, checkpoint_id)


def _before(before: str | JsonDict | None) -> str | None:
    if isinstance(before, dict):
        found = before.get("checkpoint_id")
        if found is not None and not isinstance(found, str):
            raise ApiError(
                422, "invalid_request", "before.checkpoint_id: must be text", field="before"
            )
        return found
    return before


@router.post(
    "/threads/{thread_id}/history",
    summary="The thread's states after each run, newest first",
    response_model=None,
)
async def post_history(
    thread_id: str, request: Request, server: ServerDep
) -> list[shapes.ThreadState]:
    view = await view_of(server, thread_id)
    body = await read_body(request, HistoryRequest) or HistoryRequest()
    return state.states(view, limit=body.limit, before=_before(body.before))


@router.get(
    "/threads/{thread_id}/history",
    summary="The thread's states after each run, newest first",
    response_model=None,
)
async def get_history(
    thread_id: str,
    server: ServerDep,
    limit: int = Query(10, ge=1, le=1000),
    before: str | None = None,
) -> list[shapes.ThreadState]:
    return state.states(await view_of(server, thread_id), limit=limit, before=before)
