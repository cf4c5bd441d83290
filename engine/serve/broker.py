"""Live events of the runs this server executes, for the clients that follow them.

The trace table is complete only once an execution ends (the runtime writes events together
with checkpoints), so a follower combines the table with what the broker has seen of the
current execution: every event published here is kept until the execution ends, and a
follower that subscribes gets that backlog plus everything after it, with nothing lost in
between (subscribing and taking the backlog happen in one step on the event loop).

Token events are never stored, so the backlog of an execution that ended is kept a little
longer (`RETAIN_SECONDS`, for the last `RETAIN_RUNS` runs): a client that started a run and
follows it a moment later — the run may be over by then on a busy server — still gets its
tokens, in their place among the stored events.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from engine.core.events import EventDict

RETAIN_SECONDS = 60.0
RETAIN_RUNS = 64
# put on a follower's queue when another process committed events of the run (a replica sharing a
# Postgres database): the follower reads them from the trace now instead of at its next poll
NUDGE: EventDict = {"run_id": "", "seq": 0, "type": "", "step": None, "time": "", "data": {}}


@dataclass
class _Channel:
    backlog: list[EventDict] = field(default_factory=list)
    queues: set[asyncio.Queue[EventDict | None]] = field(default_factory=set)
    active: bool = True


@dataclass
class Subscription:
    """A follower's view: the backlog at subscription time, then live events on `queue`.

    `None` on the queue means the execution ended (the run may be resumed later)."""

    run_id: str
    backlog: list[EventDict]
    queue: asyncio.Queue[EventDict | None]
    active: bool


class Broker:
    """Per-run fan-out of live events. Use from the event loop thread only."""

    def __init__(self) -> None:
        self._channels: dict[str, _Channel] = {}
        self._ended: OrderedDict[str, float] = OrderedDict()  # run id -> when its execution ended

    def open(self, run_id: str) -> None:
        """A run was accepted (queued or starting): followers should wait for its events."""
        channel = self._channels.setdefault(run_id, _Channel())
        if not channel.active:  # a new execution (a resume): the last one's events are in the table
            channel.backlog = []
        self._ended.pop(run_id, None)
        channel.active = True

    def is_active(self, run_id: str) -> bool:
        channel = self._channels.get(run_id)
        return channel is not None and channel.active

    def active_runs(self) -> list[str]:
        return [run_id for run_id, channel in self._channels.items() if channel.active]

    def publish(self, event: EventDict) -> None:
        channel = self._channels.setdefault(event["run_id"], _Channel())
        channel.backlog.append(event)
        for queue in channel.queues:
            queue.put_nowait(event)

    def close(self, run_id: str) -> None:
        """The execution ended and its events are in the trace table; its backlog (with the tokens,
        which the table has not) stays for late followers a while."""
        channel = self._channels.get(run_id)
        if channel is None:
            return
        channel.active = False
        for queue in channel.queues:
            queue.put_nowait(None)
        self._ended[run_id] = time.monotonic()
        self._forget()

    def _forget(self) -> None:
        """Drop the backlogs of executions that ended long ago (or beyond the last RETAIN_RUNS)."""
        now = time.monotonic()
        while self._ended:
            run_id, ended = next(iter(self._ended.items()))
            if len(self._ended) <= RETAIN_RUNS and now - ended < RETAIN_SECONDS:
                break
            del self._ended[run_id]
            channel = self._channels.get(run_id)
            if channel is None or channel.active:
                continue
            if channel.queues:
                channel.backlog = []
            else:
                del self._channels[run_id]

    def nudge(self, run_id: str) -> None:
        """Events of the run were committed elsewhere: wake its followers, unless it executes here
        (then they get its events live)."""
        channel = self._channels.get(run_id)
        if channel is None or channel.active:
            return
        for queue in channel.queues:
            queue.put_nowait(NUDGE)

    def subscribe(self, run_id: str) -> Subscription:
        self._forget()
        channel = self._channels.setdefault(run_id, _Channel(active=False))
        queue: asyncio.Queue[EventDict | None] = asyncio.Queue()
        channel.queues.add(queue)
        return Subscription(run_id, list(channel.backlog), queue, channel.active)

    def unsubscribe(self, subscription: Subscription) -> None:
        channel = self._channels.get(subscription.run_id)
        if channel is None:
            return
        channel.queues.discard(subscription.queue)
        if not channel.queues and not channel.active and subscription.run_id not in self._ended:
            del self._channels[subscription.run_id]
