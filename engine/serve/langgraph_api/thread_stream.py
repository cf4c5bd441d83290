"""GET /threads/{id}/stream: join a thread's stream — the parts of its run going on, then of each run that
starts on it while the client listens, one after another, each run's as joining it would send them
(runs.joined: a `metadata` part, then its parts, in the modes the run was started with).

The stream stays open (with pings) until the client leaves, as LangGraph's does. Each part's SSE id is
`<run_id>:<seq>.<n>`, so a client that reconnects with `Last-Event-ID` gets the rest of that run and then
the runs of the thread that started after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from engine.core.events import now_iso
from engine.serve.jobs import Job
from engine.serve.langgraph_api import runs
from engine.serve.langgraph_api.access import ServerDep, view_of
from engine.serve.langgraph_api.stream import SUPPORTED_MODES, Resume, point_of, sse
from engine.serve.problems import ApiError
from engine.serve.server import Server
from engine.serve.sse import HEADERS

router = APIRouter(tags=["langgraph: threads"])
# each run in the modes it was started with (the SDK's default)
OWN_MODES = frozenset({"", "run_modes"})
# LangGraph's other thread modes: not supported
REFUSED_MODES = frozenset({"lifecycle", "state_update"})


@dataclass
class Followed:
    """What this stream has sent: the last seq of each run, and the jobs (executions) it followed."""

    last: dict[str, int] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)

    def has(self, job: Job) -> bool:
        return any(seen is job for seen in self.jobs)


def _modes(given: list[str]) -> list[str]:
    """The stream modes each run is joined with: [] for its own; 422 for the thread modes not supported."""
    refused = sorted(set(given) & REFUSED_MODES)
    if refused:
        raise ApiError(
            422,
            "invalid_request",
            f"stream_mode '{refused[0]}' is not supported on a thread's stream: "
            "use run_modes, or run stream modes (values, updates, ...)",
            field="stream_mode",
        )
    unknown = sorted(
        set(given) - OWN_MODES - SUPPORTED_MODES - {"debug", "tasks", "checkpoints", "tools"}
    )
    if unknown:
        raise ApiError(
            422, "invalid_request", f"unknown stream_mode '{unknown[0]}'", field="stream_mode"
        )
    return [mode for mode in given if mode not in OWN_MODES]


def _point(raw: str, run_ids: set[str]) -> tuple[str, Resume] | None:
    """A Last-Event-ID this stream sent (`<run_id>:<seq>.<n>`); 400 for anything else."""
    if not raw:
        return None
    run_id, colon, rest = raw.rpartition(":")
    point = point_of(rest) if colon else None
    if point is None or run_id not in run_ids:
        raise ApiError(
            400,
            "bad_last_event_id",
            f"Last-Event-ID must be an id this thread's stream sent "
            f"(<run_id>:<seq>.<n>), not '{raw[:80]}'",
        )
    return run_id, point


async def _run(
    server: Server,
    thread_id: str,
    run_id: str,
    modes: list[str],
    followed: Followed,
    resume: Resume | None = None,
) -> AsyncIterator[ServerSentEvent]:
    """One run's parts, their ids prefixed with its id; a run followed before (resumed after a gate) goes on
    after the last part sent of it."""
    started = await runs.joined(server, thread_id, run_id, modes)
    followed.jobs.append(started.job)
    if resume is None and run_id in followed.last:
        started.after = followed.last[run_id]
    # followed, even when no part of it is in the modes asked
    followed.last.setdefault(run_id, started.after)
    async for message in runs.stream_messages(server, started, resume, fresh=resume is None):
        if message.id:
            followed.last[run_id] = int(str(message.id).partition(".")[0])
            message = ServerSentEvent(
                data=message.data, event=message.event, id=f"{run_id}:{message.id}"
            )
        yield message


async def _next(
    server: Server, thread_id: str, since: str, followed: Followed
) -> tuple[str, Job | None] | None:
    """The run to follow next: one of the thread's this server holds and this stream has not followed, else one
    recorded since `since` that it has not; None when there is none yet."""
    held = [
        job
        for job in server.thread_jobs(thread_id)
        if not followed.has(job) and job.state != "done"
    ]
    if held:
        job = min(held, key=lambda found: (found.created, found.run_id))
        return job.run_id, job
    view = await view_of(server, thread_id)
    recorded = sorted(
        (r for r in view.runs if r.id not in followed.last and r.created >= since),
        key=lambda r: (r.created, r.id),
    )
    return (recorded[0].id, None) if recorded else None


@router.get(
    "/threads/{thread_id}/stream",
    summary="Join a thread's stream: its runs, as they go on",
    response_model=None,
)
async def join_thread_stream(
    thread_id: str,
    request: Request,
    server: ServerDep,
    stream_mode: list[str] = Query(default_factory=list),
) -> Response:
    view = await view_of(server, thread_id)
    modes = _modes(stream_mode)
    point = _point((request.headers.get("last-event-id") or "").strip(), {r.id for r in view.runs})
    since = now_iso()
    if point is not None:
        since = next(r.created for r in view.runs if r.id == point[0])

    async def messages() -> AsyncIterator[ServerSentEvent]:
        followed = Followed()
        try:
            if point is not None:
                async for message in _run(server, thread_id, point[0], modes, followed, point[1]):
                    yield message
            while True:
                found = await _next(server, thread_id, since, followed)
                if found is None:
                    if server.queue is None or not server.queue.accepting:
                        # the server stops: no run comes
                        return
                    await asyncio.sleep(server.settings.poll)
                    continue
                async for message in _run(server, thread_id, found[0], modes, followed):
                    yield message
        except ApiError as exc:  # the thread was deleted meanwhile, the server stops, ...: the stream ends saying so
            yield sse("error", {"error": exc.code, "message": exc.message})

    return EventSourceResponse(messages(), ping=server.settings.sse_ping, headers=HEADERS)
