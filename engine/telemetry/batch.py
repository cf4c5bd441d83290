"""Spans waiting to be sent, and the thread that sends them: what the SDK's BatchSpanProcessor does,
for spans that are bytes already (engine/telemetry/spans.py).

A run's event loop only appends an encoded span to a deque (no lock: a deque's append and popleft are
atomic) and, once `max_batch` wait, wakes the sender. The sender wakes then, or `delay` seconds after
it last sent, or when asked to flush or stop; it sends what waits in bodies of at most `max_batch`
spans. More than `max_queue` waiting (a destination that is down, a flood of runs) and new spans are
dropped, counted, and said once a minute. The numbers are the BatchSpanProcessor's, from the same
variables: OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_MAX_QUEUE_SIZE
(engine/telemetry/settings.py). Only the standard library.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable

from engine.telemetry.settings import Batching

Send = Callable[[list[bytes]], None]  # one body's spans: encodes and posts them, never raises
Warn = Callable[[str], None]


class Batch:
    """The spans of one destination, sent from a thread of their own by `send`."""

    def __init__(self, send: Send, batching: Batching, warn: Warn) -> None:
        self.send = send
        self.warn = warn
        self.delay = batching.delay
        self.max_batch = batching.max_batch
        self.max_queue = self.limit = batching.max_queue
        self.dropped = 0
        self._start()
        reset = weakref.WeakMethod(self._restart)

        def after_fork() -> None:  # a forked child has the deque but not the thread: its own, empty
            method = reset()
            if method is not None:
                method()

        os.register_at_fork(after_in_child=after_fork)

    def _restart(self) -> None:
        if not self.stopping:
            self._start()

    def _start(self) -> None:
        self.queue: deque[bytes] = deque()
        self.wake = threading.Event()
        self.changed = threading.Condition()
        self.asked = 0  # flushes asked for, and the last one done
        self.done = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="blockyard-telemetry", daemon=True)
        self.thread.start()

    def add(self, span: bytes) -> None:
        """Queue one span (the run's thread: quick, never blocks)."""
        queue = self.queue
        queue.append(span)
        if len(queue) >= self.max_batch:
            self._full()

    def _full(self) -> None:
        """A batch waits: the sender is woken; what is past the queue's bound is dropped (the newest)."""
        queue = self.queue
        while len(queue) > self.max_queue:
            try:
                queue.pop()
            except IndexError:  # the sender took them meanwhile
                break
            self.dropped += 1
        if not self.wake.is_set():
            self.wake.set()

    def flush(self, timeout: float) -> bool:
        """Send what waits now; True once it was sent (or given up on), False if `timeout` seconds passed first."""
        with self.changed:
            self.asked += 1
            asked = self.asked
        self.wake.set()
        with self.changed:
            return self.changed.wait_for(
                lambda: self.done >= asked or not self.thread.is_alive(), timeout
            )

    def stop(self, timeout: float) -> None:
        """Send what waits and end the thread, waiting at most `timeout` seconds; spans added later are dropped."""
        with self.changed:
            self.stopping = True
            self.asked += 1
        self.wake.set()
        self.thread.join(timeout)
        self.max_queue = self.max_batch = 0  # from here on every span added is dropped at once

    def _run(self) -> None:
        while True:
            woken = self.wake.wait(self.delay)
            self.wake.clear()
            with self.changed:
                asked, stopping = self.asked, self.stopping
            # woken by a full batch: full batches only (spans that came while one was sent wait for the next;
            # sent at once they would double the posts); the delay, a flush, a stop: everything
            self._drain(everything=not woken or asked != self.done or stopping)
            with self.changed:
                self.done = asked
                self.changed.notify_all()
            if stopping:
                return

    def _drain(self, *, everything: bool) -> None:
        queue = self.queue
        while queue and (everything or len(queue) >= self.max_batch):
            batch = [queue.popleft() for _ in range(min(len(queue), self.max_batch))]
            try:
                self.send(batch)
            except (
                Exception
            ) as exc:  # a bug of ours: said, the thread goes on (spans of later runs still leave)
                self.warn(f"{len(batch)} span(s) could not be sent ({type(exc).__name__}: {exc})")
        dropped = self.dropped
        if dropped:
            self.dropped -= dropped
            self.warn(
                f"{dropped} span(s) were dropped: more than {self.limit} waited to be sent "
                "(OTEL_BSP_MAX_QUEUE_SIZE)"
            )
