"""A private event loop in a daemon thread, so that the sync API works everywhere — also where a
loop is already running (a notebook, a server handler) and `asyncio.run` would refuse."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

CANCEL_GRACE = 30.0  # seconds a cancelled run gets to record that it was interrupted


class Portal:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="blockyard-loop", daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run `fn()` on the portal's loop and wait; Ctrl-C cancels it and waits for its cleanup."""
        done = threading.Event()

        async def guarded() -> T:
            try:
                return await fn()
            finally:
                done.set()

        future = asyncio.run_coroutine_threadsafe(guarded(), self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            done.wait(CANCEL_GRACE)
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
