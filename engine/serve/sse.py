"""Server-sent events: one SSE message per run event, `id` = the event's seq, `event` = its type.

A client that reconnects with `Last-Event-ID: <seq>` gets exactly the events after that one.
Heartbeats are SSE comments (sse-starlette's ping); shutdown closes the streams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from engine.core.values import JsonDict
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
        raise ApiError(
            400, "bad_last_event_id", f"Last-Event-ID must be an event seq number, not '{shown}'"
        )
    # compared by length first: int() refuses more than 4300 digits (a ValueError, not a bad request)
    if len(text) > len(str(MAX_SEQ)) or int(text) > MAX_SEQ:
        raise ApiError(
            400, "bad_last_event_id", f"Last-Event-ID must be at most {MAX_SEQ}, not '{shown}'"
        )
    return int(text)


def message(event: Mapping[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(
        data=json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str),
        event=event["type"],
        id=str(event["seq"]),
    )


def named(event: str, data: Mapping[str, Any]) -> ServerSentEvent:
    """A message of the stream itself, not a run event (`thread_id`, `complete`, `error`): no `id`."""
    return ServerSentEvent(
        data=json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str), event=event
    )


def stream(
    events: AsyncIterator[Mapping[str, Any]],
    *,
    ping: float,
    epilogue: Callable[[], Awaitable[JsonDict | ServerSentEvent | None]] | None = None,
    prologue: Sequence[ServerSentEvent] = (),
) -> EventSourceResponse:
    """Stream `events` after the `prologue` messages; `epilogue` may add one last message: a dict
    is an `error` (e.g. a rejected run), a ServerSentEvent goes as it is (a thread turn's `complete`)."""

    async def messages() -> AsyncIterator[ServerSentEvent]:
        for first in prologue:
            yield first
        async for event in events:
            yield message(event)
        if epilogue is not None:
            last = await epilogue()
            if isinstance(last, ServerSentEvent):
                yield last
            elif last is not None:
                yield named("error", last)

    return EventSourceResponse(messages(), ping=ping, headers=HEADERS)
