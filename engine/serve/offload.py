"""The server's runs execute on an event loop of their own, in its own thread.

A run evaluates the yard's templates and expressions, and however well they are bounded
(engine/templates/limits.py) one may compute for seconds. On the server's event loop that would
stall every request, `/healthz` included. So flow executions run on a private loop (a
`Portal`), and their events cross back to the server's loop, where the broker and the HTTP
handlers live. The state database is shared safely between loops (engine/runtime/writer.py).

Events cross in batches (`_Handoff`): what the run loop hands over before the server's loop gets
to it is delivered by one callback there. Each crossing wakes the server's loop through its
self-pipe and takes the GIL from the run loop; 200 runs of a 5-step flow on the mock send ~6,400
events (tokens included), and crossing one by one cost the server's loop more than answering the
requests did.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar

from engine.core.events import EventDict
from engine.runtime.sync import SyncLoop

T = TypeVar("T")


class _Handoff:
    """Hands items from the run loop's thread to one other loop (`home`): one wake-up of `home` per
    batch, not per item; items arrive in the order they were sent."""

    def __init__(self, home: asyncio.AbstractEventLoop) -> None:
        self.home = home
        self._lock = threading.Lock()
        self._items: list[tuple[Callable[[Any], None], Any]] = []

    def send(self, put: Callable[[Any], None], item: Any) -> None:
        """`put(item)` on `home`, soon."""
        with self._lock:
            self._items.append((put, item))
            wake = len(self._items) == 1  # else a flush is due already and takes this item too
        if wake:
            try:
                self.home.call_soon_threadsafe(self._flush)
            # `home` is closed: nothing will take these, and the next send raises too
            except RuntimeError:
                with self._lock:
                    self._items.clear()
                raise

    def _flush(self) -> None:
        with self._lock:
            items, self._items = self._items, []
        for put, item in items:
            put(item)


class RunLoop:
    """Runs coroutines and event streams on a private loop; awaited from the server's loop."""

    def __init__(self) -> None:
        self._portal = SyncLoop()
        self._handoff: _Handoff | None = None  # to the loop streams are consumed on (the server's)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._portal.loop

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`await fn()` on the run loop."""

        async def job() -> T:
            return await fn()

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job(), self._portal.loop))

    async def stream(
        self, events: Callable[[], AsyncGenerator[EventDict, None]]
    ) -> AsyncGenerator[EventDict, None]:
        """Iterate `events()` on the run loop and yield what it yields, here.

        After the first event the execution waits until the second is asked for (a resume takes its
        first step, judging the decision, before it waits for a slot); from then on it runs ahead.
        Cancelled here, it cancels the execution there and still yields what the execution yields
        while it winds down (its `interrupted` ending), then re-raises the cancellation. Closed
        early, it cancels the execution and waits until it has cleaned up."""
        home = asyncio.get_running_loop()
        if self._handoff is None or self._handoff.home is not home:
            # (a stream begun on another loop keeps its own)
            self._handoff = _Handoff(home)
        send = self._handoff.send
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        put = queue.put_nowait
        go_on = asyncio.Event()  # set (on the run loop) once the second event is asked for
        future = asyncio.run_coroutine_threadsafe(
            _pump(events, send, put, go_on), self._portal.loop
        )
        cancelled: asyncio.CancelledError | None = None
        ended = False
        delivered = 0
        try:
            while True:
                if delivered == 1:
                    self._portal.loop.call_soon_threadsafe(go_on.set)
                try:
                    kind, value = await queue.get()
                except asyncio.CancelledError as exc:
                    if cancelled is not None:
                        raise
                    cancelled = exc
                    future.cancel()  # cancels the execution's task on the run loop
                    continue
                if kind == "done":
                    ended = True
                    break
                if kind == "error":
                    ended = True
                    if cancelled is None or not isinstance(value, asyncio.CancelledError):
                        raise value
                    break
                delivered += 1
                yield value
        finally:
            if not ended:  # closed early: stop the execution and wait for its cleanup
                future.cancel()
                await _until_ended(queue)
        if cancelled is not None:
            raise cancelled

    def close(self) -> None:
        self._portal.close()


async def _pump(
    events: Callable[[], AsyncGenerator[EventDict, None]],
    send: Callable[[Callable[[Any], None], Any], None],
    put: Callable[[Any], None],
    go_on: asyncio.Event,
) -> None:
    """On the run loop: `send(put, ...)` each event of `events()` over, then ("done", None) or ("error", exc);
    after the first event, wait for `go_on` (the second one asked for)."""
    try:
        async with aclosing(events()) as stream:
            first = True
            async for event in stream:
                send(put, ("event", event))
                if first:
                    first = False
                    await go_on.wait()
    except BaseException as exc:  # handed over, raised where the stream is consumed
        send(put, ("error", exc))
    else:
        send(put, ("done", None))


async def _until_ended(queue: asyncio.Queue[tuple[str, Any]]) -> None:
    """Drop what a stream closed early still hands over, until its execution has ended."""
    while True:
        kind, _ = await queue.get()
        if kind in ("done", "error"):
            break
