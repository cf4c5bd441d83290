"""What the route modules share: the server's parts, a thread's view, whether a thread is busy."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from engine.core.diagnostics import did_you_mean
from engine.serve.langgraph_api import state
from engine.serve.problems import ApiError, conflict, not_found
from engine.serve.run_service import RunService
from engine.serve.server import Server
from engine.state import threads


async def get_server(request: Request) -> Server:
    server: Server = request.app.state.server
    return server


ServerDep = Annotated[Server, Depends(get_server)]


def service(server: Server) -> RunService:
    if server.service is None:
        raise ApiError(503, "starting", "the server is starting")
    return server.service


async def find_view(server: Server, thread_id: str) -> state.ThreadView | None:
    return await service(server).engine.db.aread(lambda conn: state.read(conn, thread_id))


async def view_of(server: Server, thread_id: str) -> state.ThreadView:
    """The thread's view; 404 `unknown_thread` (with a did-you-mean hint) when there is none."""
    found = await find_view(server, thread_id)
    if found is None:
        hint = did_you_mean(thread_id, await service(server).thread_ids())
        raise not_found("thread", f"unknown thread '{thread_id}'{hint}")
    return found


def busy(server: Server, thread_id: str) -> bool:
    """A turn of the thread is queued or running in this server."""
    return bool(server.thread_jobs(thread_id))


def check_free(server: Server, thread_id: str, doing: str) -> None:
    """409 `thread_busy` while a turn of the thread is queued or running here; `doing` it waits."""
    if busy(server, thread_id):
        raise conflict(
            "thread_busy",
            f"thread '{thread_id}' has a run queued or running; {doing} once it is over",
        )


def held(thread_id: str, outcome: threads.Busy, doing: str) -> ApiError:
    """409 `thread_busy` for a thread a turn holds in the database (any server's)."""
    return conflict(
        "thread_busy",
        f"thread '{thread_id}' has a turn going on or waiting for approval (run {outcome.run_id}); "
        f"{doing} once it is over",
    )
