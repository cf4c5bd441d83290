"""Time, injectable: the scheduler asks a clock for `now` and to sleep, so tests move time by hand."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    async def sleep_until(self, when: datetime) -> None:
        """Return once `now() >= when` (or later)."""
        ...


class SystemClock:
    """Wall-clock time. Long sleeps are cut into short ones so a changed system clock is noticed."""

    max_nap = 30.0

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime) -> None:
        while (left := (when - self.now()).total_seconds()) > 0:
            await asyncio.sleep(min(left, self.max_nap))


class ManualClock:
    """A clock that moves only when told to, for tests and simulations.

    `set` may be called from any thread: sleepers on other event loops are woken thread-safely.
    """

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._sleepers: list[tuple[datetime, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    def sleeping(self) -> list[datetime]:
        """The times the sleepers wait for: a test moves time once the loop it drives is asleep."""
        with self._lock:
            return [when for when, _, _ in self._sleepers]

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when
            due = [s for s in self._sleepers if s[0] <= when]
            self._sleepers = [s for s in self._sleepers if s[0] > when]
        for _, loop, future in due:
            loop.call_soon_threadsafe(_settle, future)

    async def sleep_until(self, when: datetime) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._now >= when:
                return
            self._sleepers.append((when, loop, future))
        try:
            await future
        finally:
            with self._lock:
                self._sleepers = [s for s in self._sleepers if s[2] is not future]


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
