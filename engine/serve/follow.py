"""Follow a run's events: replay the trace, then go on live, across pauses and resumes.

Events carry a per-run `seq`; a follower remembers the last one it gave out and never gives
out a smaller or equal one again, so replay, backlog and live events can overlap freely. Runs
executed by another process (a `blockyard resume` next to the server, another replica) are
followed through the trace table: polled, and on Postgres read at once when the broker is nudged
by a notification of their commit (engine/state/postgres.py, `listen_events`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from engine.events import SETTLED_STATUSES as SETTLED
from engine.events import TERMINAL_TYPES as END_OF_EXECUTION
from engine.events import EventDict
from engine.serve.broker import NUDGE, Broker


class TraceReader(Protocol):
    async def events(self, run_id: str, after: int) -> list[EventDict]:
        """Stored events of a run with seq > after, in order."""
        ...

    async def status(self, run_id: str) -> str | None:
        """The run's status in the runs table, or None when it is not there (yet)."""
        ...


async def follow(run_id: str, after: int, broker: Broker, trace: TraceReader, *, until_pause: bool = False,
                 poll: float = 0.5) -> AsyncIterator[EventDict]:
    """Events with seq > `after`, then live ones (heartbeats are the SSE layer's business).

    Ends when the run is settled (finished, failed, interrupted) and idle; with `until_pause`,
    at the end of the current execution (its run_finished, run_failed or approval_required).
    """
    subscription = broker.subscribe(run_id)
    last = after
    try:
        replay = await trace.events(run_id, last)
        # The stored events and what the execution published overlap; only the published ones have
        # the tokens, which go in their place by seq. What was published while the trace was read is
        # on the queue already, and the read may hold events that came after it: take it now, or
        # `last` would move past those tokens and they would be skipped.
        arrived = _drain(subscription.queue)
        merged = {event["seq"]: event for event in [*subscription.backlog, *arrived, *replay]
                  if event["seq"] > last}
        for seq in sorted(merged):
            last = seq
            yield merged[seq]
        executing = subscription.active
        if until_pause and not executing and (replay and replay[-1]["type"] in END_OF_EXECUTION):
            return
        while True:
            if not executing and await trace.status(run_id) in SETTLED:
                for event in await trace.events(run_id, last):
                    last = event["seq"]
                    yield event
                return
            try:
                item = await asyncio.wait_for(subscription.queue.get(), timeout=poll)
            except TimeoutError:
                item = NUDGE
            if item is NUDGE:
                fresh = await trace.events(run_id, last)  # written by another process
                for event in fresh:
                    last = event["seq"]
                    yield event
                if until_pause and fresh and fresh[-1]["type"] in END_OF_EXECUTION:
                    return
                continue
            if item is None:  # the execution ended here; its events are all in the table now
                executing = False
                for event in await trace.events(run_id, last):
                    last = event["seq"]
                    yield event
                if until_pause:
                    return
                continue
            executing = True
            if item["seq"] > last:
                last = item["seq"]
                yield item
                if until_pause and item["type"] in END_OF_EXECUTION:
                    return
    finally:
        broker.unsubscribe(subscription)


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
