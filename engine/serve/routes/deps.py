"""Shared pieces of the route modules."""

from __future__ import annotations

from fastapi import Request

from engine.core.errors import BlockyardError
from engine.core.events import EventDict
from engine.core.values import JsonDict
from engine.serve.follow import TraceReader
from engine.serve.jobs import Job
from engine.serve.problems import ApiError, from_engine
from engine.serve.server import Server


async def get_server(request: Request) -> Server:
    # async: FastAPI runs a plain `def` dependency in a worker thread, which costs more than the lookup
    server: Server = request.app.state.server
    return server


class _Trace:
    def __init__(self, server: Server) -> None:
        self.server = server

    async def events(self, run_id: str, after: int) -> list[EventDict]:
        if self.server.service is None:
            return []
        return await self.server.service.events(run_id, after)

    async def status(self, run_id: str) -> str | None:
        if self.server.service is None:
            return None
        return await self.server.service.status(run_id)


def trace_reader(server: Server) -> TraceReader:
    return _Trace(server)


async def job_outcome(job: Job) -> JsonDict | None:
    """After a stream ends: the error when the run was refused instead of run, else None."""
    if not job.result.done() or job.result.cancelled():
        return None
    exc = job.result.exception()
    if exc is None:
        return None
    problem = (
        from_engine(exc) if isinstance(exc, BlockyardError) else ApiError(500, "internal", str(exc))
    )
    return {"code": problem.code, "message": problem.message, "run_id": job.run_id}
