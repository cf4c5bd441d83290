"""Server-sent events: one SSE message per run event, `id` = the event's seq, `event` = its type.

A client that reconnects with `Last-Event-ID: <seq>` gets exactly the events after that one.
Heartbeats are SSE comments (sse-starlette's ping); shutdown closes the streams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from fastapi import Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from engine.serve.problems import ApiError

MAX_SEQ = 2**63 - 1  # SQLite's largest integer
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def last_event_id(request: Request) -> int:
    """Resume point: the Last-Event-ID header (or ?after=N), 0 for the start; 400 unless a seq number."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    text = raw.strip()
    if text.startswith("-") and text[1:].isdigit():
        raise ApiError(400, "bad_last_event_id", "Last-Event-ID must not be negative")
    # ASCII digits only (int() would also take '1_000', '+5' and other scripts' digits), and within
    # SQLite's 64-bit integers: no run has that many events, but a larger number must not reach the query
    shown = raw if len(raw) <= 40 else raw[:37] + "..."
    if not (text.isascii() and text.isdigit()):
        raise ApiError(400, "bad_last_event_id", f"Last-Event-ID must be an event seq number, not '{shown}'")
    if int(text) > MAX_SEQ:
        raise ApiError(400, "bad_last_event_id", f"Last-Event-ID must be at most {MAX_SEQ}, not '{shown}'")
    return int(text)


def message(event: Mapping[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str),
                           event=event["type"], id=str(event["seq"]))


def stream(events: AsyncIterator[Mapping[str, Any]], *, ping: float,
           epilogue: Callable[[], Awaitable[dict[str, Any] | None]] | None = None) -> EventSourceResponse:
    """Stream `events`; `epilogue` may add one last `error` message (e.g. a rejected run)."""

    async def messages() -> AsyncIterator[ServerSentEvent]:
        async for event in events:
            yield message(event)
        if epilogue is not None:
            problem = await epilogue()
            if problem is not None:
                yield ServerSentEvent(data=json.dumps(problem), event="error")

    return EventSourceResponse(messages(), ping=ping, headers=HEADERS)
