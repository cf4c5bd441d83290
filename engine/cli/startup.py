"""A command's start without the cyclic garbage collector's full collections.

Starting `blockyard run` imports LangGraph, LangChain, pydantic and the engine and loads the yard:
more than 100,000 objects that live as long as the process. On the way the collector scans all
of them again and again (its thresholds count allocations, and imports allocate a lot), though
almost nothing it finds is garbage: a quarter to a third of the CPU time of a cold `blockyard run
hello` on the mock (bench/compare.py, the cold-start table), more than the engine's own imports.

So a `blockyard` process (and only a process: `main()` called by a test runs as before) starts
with the collector off (engine/console.py turns it off before the CLI's imports, `begin` keeps it
so), and turns it back on when a command is about to do its work
(`settle`, from the command classes of engine/cli/options.py), after `gc.freeze()`: what was
built so far stays for the life of the process, so the run's own collections skip it. A command
that loads more before its work (the runtime and the yard: `run`, `resume`) does that in `loading()`.
Garbage made before `settle` (a few hundred cycles among the imports) is kept, not freed.

`blockyard serve` loads its part (uvicorn, FastAPI, the runtime, the yard, the app) in `serving()`:
frozen too, after one collection (those imports leave some 50,000 objects of garbage behind), and
its young collections made rarer (`SERVER_THRESHOLDS`). A server holds hundreds of runs in flight;
at Python's default thresholds their objects outlive two young collections, reach the oldest
generation and set off full collections that walk the whole heap and free nothing (under 200
concurrent runs: a quarter of the server's CPU, each full collection ~130 ms with the world stopped).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

_process = (
    False  # is this a `blockyard` process (begun by the entry point), not a test calling main()?
)


def begin() -> None:
    """The entry point of a `blockyard` process: no collections until a command settles."""
    global _process
    _process = True
    gc.disable()


def settle() -> None:
    """What the process loaded stays (frozen, never scanned again); the collector works from here on."""
    if _process and not gc.isenabled():
        gc.freeze()
        gc.enable()


# (threshold0, threshold1, threshold2) of gc.set_threshold in a server: a young collection every 20,000
# allocations instead of 700, so that a run's short-lived objects are mostly freed by reference count first;
# the older generations' ratios are Python's own
SERVER_THRESHOLDS = (20_000, 10, 10)


def serving() -> AbstractContextManager[None]:
    """Around a server's loading, in a `blockyard` process: no collections in it; then its garbage is
    collected once, what stays is frozen, and the collector runs at SERVER_THRESHOLDS from then on."""
    return _paused(_serve)


def loading() -> AbstractContextManager[None]:
    """Around the loading a command does before its work (imports, the yard's files): no collections
    in it, in a `blockyard` process; then what it loaded is frozen like the start's."""
    return _paused(settle)


def _serve() -> None:
    gc.collect()
    gc.set_threshold(*SERVER_THRESHOLDS)
    gc.freeze()
    gc.enable()


@contextmanager
def _paused(then: Callable[[], None]) -> Iterator[None]:
    """No collections in the block, in a `blockyard` process; `then` after it."""
    if not _process:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        then()
