"""Follow a run's events: replay the trace, then go on live, across pauses and resumes.

Events carry a per-run `seq`; a follower remembers the last one it gave out and never gives
out a smaller or equal one again, so replay, backlog and live events can overlap freely. Runs
executed by another process (a `blockyard resume` next to the server, another replica) are
followed through the trace table: polled, and on Postgres read at once when the broker is nudged
by a notification of their commit (engine/state/postgres.py, `listen_events`).

A run this server executes is followed through the broker, never by polling the table: the
execution stores its events on the run loop's thread (engine/serve/offload.py) before the server's
loop has published them, so the table can be ahead of the broker, and an event read there would
move `last` past the tokens still on their way to the broker or on the follower's queue (never
stored, they would be lost). On a busy server a follower's poll may time out with the whole
execution, ended meanwhile, waiting on its queue: the queue is taken first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from engine.core.events import SETTLED_STATUSES as SETTLED
from engine.core.events import TERMINAL_TYPES as END_OF_EXECUTION
from engine.core.events import EventDict
from engine.serve.broker import NUDGE, Broker, Subscription


class TraceReader(Protocol):
    async def events(self, run_id: str, after: int) -> list[EventDict]:
        """Stored events of a run with seq > after, in order."""
        ...

    async def status(self, run_id: str) -> str | None:
        """The run's status in the runs table, or None when it is not there (yet)."""
        ...


async def follow(
    run_id: str,
    after: int,
    broker: Broker,
    trace: TraceReader,
    *,
    until_pause: bool = False,
    poll: float = 0.5,
) -> AsyncIterator[EventDict]:
    """Events with seq > `after`, then live ones (heartbeats are the SSE layer's business).

    Ends when the run is settled (finished, failed, interrupted) and idle; with `until_pause`,
    at the end of the current execution (its run_finished, run_failed or approval_required).
    """
    subscription = broker.subscribe(run_id)
    last = after
    try:
        merged, replay = await _catch_up(run_id, last, broker, trace, subscription)
        for event in merged:
            last = event["seq"]
            yield event
        if (
            until_pause
            and not subscription.active
            and (replay and replay[-1]["type"] in END_OF_EXECUTION)
        ):
            return
        while True:
            if (
                not _queued(broker, subscription)
                and await trace.status(run_id) in SETTLED
                and not _queued(broker, subscription)
            ):
                for event in await trace.events(run_id, last):
                    last = event["seq"]
                    yield event
                return
            item = await _next_item(subscription, poll)
            if item is NUDGE:
                # executed here: its events come on the queue, tokens and all
                if _queued(broker, subscription):
                    continue
                fresh = await trace.events(run_id, last)  # written by another process
                for event in fresh:
                    last = event["seq"]
                    yield event
                if until_pause and fresh and fresh[-1]["type"] in END_OF_EXECUTION:
                    return
                continue
            if item is None:  # the execution ended here; its events are all in the table now
                for event in await _stored_unless_queued(run_id, last, broker, trace, subscription):
                    last = event["seq"]
                    yield event
                if until_pause:
                    return
                continue
            if item["seq"] > last:
                last = item["seq"]
                yield item
                if until_pause and item["type"] in END_OF_EXECUTION:
                    return
    finally:
        broker.unsubscribe(subscription)


async def _catch_up(
    run_id: str, after: int, broker: Broker, trace: TraceReader, subscription: Subscription
) -> tuple[list[EventDict], list[EventDict]]:
    """The events with seq > `after` so far, in order, from the trace and the broker; and the trace's."""
    replay = await trace.events(run_id, after)
    # The stored events and what the execution published overlap; only the published ones have
    # the tokens, which go in their place by seq. What was published while the trace was read is
    # on the queue already, and the read may hold events that came after it: take it now, or
    # `last` would move past those tokens and they would be skipped.
    arrived = _drain(subscription.queue)
    published = [*subscription.backlog, *arrived]
    if published and broker.is_active(run_id):
        # It executes here, and the table may be ahead of the broker: what it has after the last
        # event published is on its way to the broker, tokens between, and comes on the queue.
        # (With nothing published yet, the execution has not gone past its first event, which
        # has no token before it: RunLoop.stream holds it there until that event is taken.)
        newest = max(event["seq"] for event in published)
        replay = [event for event in replay if event["seq"] <= newest]
    merged = {event["seq"]: event for event in [*published, *replay] if event["seq"] > after}
    return [merged[seq] for seq in sorted(merged)], replay


def _queued(broker: Broker, subscription: Subscription) -> bool:
    """Whether the broker has events of the run for this follower: those of an execution here
    (which the table may hold before they reach the broker), or what it published that is still
    on the queue (an execution that ended while the follower waited). They come before the table."""
    return broker.is_active(subscription.run_id) or not subscription.queue.empty()


async def _next_item(subscription: Subscription, poll: float) -> EventDict | None:
    """The next item on the follower's queue, or NUDGE after `poll` seconds without one: time to look
    at the table, where another process may have written events."""
    try:
        return await asyncio.wait_for(subscription.queue.get(), timeout=poll)
    except TimeoutError:
        return NUDGE


async def _stored_unless_queued(
    run_id: str, after: int, broker: Broker, trace: TraceReader, subscription: Subscription
) -> list[EventDict]:
    """After an execution here ended, its events in the table with seq > `after`: none when the queue
    has more (another execution here began already), which come before the table."""
    if _queued(broker, subscription):
        return []
    return await trace.events(run_id, after)


def _drain(queue: asyncio.Queue[EventDict | None]) -> list[EventDict]:
    """Take the events on a follower's queue now; what tells of the execution (another process
    committed, the execution ended) goes back on it, in that order, for the follower's loop."""
    found: list[EventDict] = []
    signals: list[EventDict | None] = []
    while not queue.empty():
        item = queue.get_nowait()
        if item is None or item is NUDGE:
            if item not in signals:
                signals.append(item)
        else:
            found.append(item)
    for signal in sorted(signals, key=lambda item: item is None):  # the end last
        queue.put_nowait(signal)
    return found
