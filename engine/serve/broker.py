"""Live events of the runs this server executes, for the clients that follow them.

The trace table is complete only once an execution ends (the runtime writes events together
with checkpoints), so a follower combines the table with what the broker has seen of the
current execution: every event published here is kept until the execution ends, and a
follower that subscribes gets that backlog plus everything after it, with nothing lost in
between (subscribing and taking the backlog happen in one step on the event loop).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from engine.events import EventDict

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

    def open(self, run_id: str) -> None:
        """A run was accepted (queued or starting): followers should wait for its events."""
        channel = self._channels.setdefault(run_id, _Channel())
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
        """The execution ended and its events are in the trace table: drop the backlog."""
        channel = self._channels.get(run_id)
        if channel is None:
            return
        channel.active = False
        channel.backlog = []
        for queue in channel.queues:
            queue.put_nowait(None)
        if not channel.queues:
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
        channel = self._channels.setdefault(run_id, _Channel(active=False))
        queue: asyncio.Queue[EventDict | None] = asyncio.Queue()
        channel.queues.add(queue)
        return Subscription(run_id, list(channel.backlog), queue, channel.active)

    def unsubscribe(self, subscription: Subscription) -> None:
        channel = self._channels.get(subscription.run_id)
        if channel is None:
            return
        channel.queues.discard(subscription.queue)
        if not channel.queues and not channel.active:
            del self._channels[subscription.run_id]
