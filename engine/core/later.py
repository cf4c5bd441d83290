"""Work done a little later, on a thread of the process's own, many pieces in a row: what the observers of
runs that may lag are told (traces and metrics: engine/runtime/observe.py, `told_later`).

Why: an observer told between a run's steps finds its code and data cold (the run's own work evicted
them) and costs more than the same work done back to back, many runs in a row (docs/performance.md,
"OpenTelemetry traces"). Here the run's thread only appends a piece; the thread wakes every `DELAY`
seconds, or once `BATCH` pieces wait, and does them one after the other. `flush()` does what waits at
once, in the caller's thread: before a command's spans are sent, before metrics are scraped, at exit.
Pieces are done in the order they came and one at a time (a lock), whoever does them. Only the
standard library.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("blockyard.later")

DELAY = 1.0  # seconds a piece may wait, at most (pieces done in longer rows cost less each)
BATCH = 256  # pieces waiting that wake the thread before the delay is up

Piece = tuple[Callable[..., object], tuple[Any, ...]]


class _Later:
    def __init__(self) -> None:
        self.queue: deque[Piece] = deque()  # append and popleft are atomic: no lock to add
        # one drain at a time, so that pieces stay in order (reentrant: a piece that flushes does not hang)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.starting = threading.Lock()

    def put(self, piece: Piece) -> None:
        queue = self.queue
        queue.append(piece)
        if self.thread is None:
            self._start()
        elif len(queue) >= BATCH and not self.wake.is_set():
            self.wake.set()

    def _start(self) -> None:
        with self.starting:
            if self.thread is None:
                thread = threading.Thread(target=self._run, name="blockyard-later", daemon=True)
                thread.start()
                self.thread = thread

    def _run(self) -> None:
        while True:
            self.wake.wait(DELAY)
            self.wake.clear()
            self.drain()

    def drain(self) -> None:
        with self.lock:
            queue = self.queue
            while queue:
                function, args = queue.popleft()
                try:
                    function(*args)
                except Exception as exc:  # a bug of a piece's: said, and the others still done
                    log.warning("work done later failed (%s: %s)", type(exc).__name__, exc)


_later = _Later()


def put(function: Callable[..., object], *args: Any) -> None:
    """Call `function(*args)` a little later, on the thread (quick: never blocks)."""
    _later.put((function, args))


def flush() -> None:
    """Do what waits now, in this thread (after any drain under way)."""
    _later.drain()


def thread() -> threading.Thread | None:
    """The thread that does the work (None before the first piece): benches read its CPU clock."""
    return _later.thread


def _after_fork() -> None:
    # a forked child has the pieces of its parent's runs, which the parent does, and a lock perhaps held
    # by the parent's thread, which the child does not have: it starts over
    global _later
    _later = _Later()


os.register_at_fork(after_in_child=_after_fork)
atexit.register(flush)
