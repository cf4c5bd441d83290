"""The event loop behind the sync API (`yard.run`, `yard.resume`, ...): anyio's blocking portal, a
loop in a daemon thread, so that the sync calls work everywhere — also where a loop is already
running (a notebook, a server handler) and `asyncio.run` would refuse."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

T = TypeVar("T")

CANCEL_GRACE = 30.0  # seconds a cancelled run gets to record that it was interrupted


class SyncLoop:
    """One background event loop; `call` runs a coroutine on it and waits for the result."""

    def __init__(self) -> None:
        # anyio's portal (~30 ms of imports): the CLI runs on asyncio.run, only the sync API needs it
        from anyio.from_thread import start_blocking_portal

        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal = self._stack.enter_context(
            start_blocking_portal("asyncio", name="blockyard-loop")
        )
        # the loop itself, for code that hands coroutines over with run_coroutine_threadsafe
        self.loop: asyncio.AbstractEventLoop = self._portal.call(asyncio.get_running_loop)

    def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run `fn()` on the loop and wait; Ctrl-C cancels it and waits for its cleanup."""
        done = threading.Event()
        tasks: list[asyncio.Task[object]] = []

        async def guarded() -> T:
            task = asyncio.current_task()
            if task is not None:
                tasks.append(task)
            try:
                return await fn()
            finally:
                done.set()

        future = self._portal.start_task_soon(guarded)
        try:
            return future.result()
        except KeyboardInterrupt:
            # One plain cancellation of the task, as asyncio does it: the run then records that it
            # was interrupted (its cleanup awaits), which a cancelled anyio scope would cancel again.
            if tasks:
                self._portal.call(tasks[0].cancel)
            else:
                future.cancel()
            done.wait(CANCEL_GRACE)
            raise

    def close(self) -> None:
        """Stop the loop (tasks still running are cancelled) and end its thread."""
        with contextlib.suppress(RuntimeError):  # stopped already
            self._portal.call(self._portal.stop, True)
        self._stack.close()
