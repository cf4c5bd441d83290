"""The server's runs execute on an event loop of their own, in its own thread.

A run evaluates the yard's templates and expressions, and however well they are bounded
(engine/template_limits.py) one may compute for seconds. On the server's event loop that would
stall every request, `/healthz` included. So flow executions run on a private loop (a
`Portal`), and their events cross back to the server's loop, where the broker and the HTTP
handlers live. The state database is shared safely between loops (engine/runtime/writer.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar

from engine.events import EventDict
from engine.runtime.sync import SyncLoop

T = TypeVar("T")


class RunLoop:
    """Runs coroutines and event streams on a private loop; awaited from the server's loop."""

    def __init__(self) -> None:
        self._portal = SyncLoop()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._portal.loop

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`await fn()` on the run loop."""
        async def job() -> T:
            return await fn()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job(), self._portal.loop))

    async def stream(self, events: Callable[[], AsyncGenerator[EventDict, None]]) -> AsyncGenerator[EventDict, None]:
        """Iterate `events()` on the run loop and yield what it yields, here.

        After the first event the execution waits until the second is asked for (a resume takes its
        first step, judging the decision, before it waits for a slot); from then on it runs ahead.
        Cancelled here, it cancels the execution there and still yields what the execution yields
        while it winds down (its `interrupted` ending), then re-raises the cancellation. Closed
        early, it cancels the execution and waits until it has cleaned up."""
        home = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        put = queue.put_nowait
        go_on = asyncio.Event()  # set (on the run loop) once the second event is asked for

        async def pump() -> None:
            try:
                async with aclosing(events()) as stream:
                    first = True
                    async for event in stream:
                        home.call_soon_threadsafe(put, ("event", event))
                        if first:
                            first = False
                            await go_on.wait()
            except BaseException as exc:  # handed over, raised where the stream is consumed
                home.call_soon_threadsafe(put, ("error", exc))
            else:
                home.call_soon_threadsafe(put, ("done", None))

        future = asyncio.run_coroutine_threadsafe(pump(), self._portal.loop)
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
                while True:
                    kind, _ = await queue.get()
                    if kind in ("done", "error"):
                        break
        if cancelled is not None:
            raise cancelled

    def close(self) -> None:
        self._portal.close()
