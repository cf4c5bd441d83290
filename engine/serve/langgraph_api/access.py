"""What the route modules share: the server's parts, a thread's view, whether a thread is busy."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from engine.core.diagnostics import did_you_mean
from engine.serve.langgraph_api import state
from engine.serve.problems import ApiError, not_found
from engine.serve.run_service import RunService
from engine.serve.server import Server


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
