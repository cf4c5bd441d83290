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
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_process = False  # is this a `blockyard` process (begun by the entry point), not a test calling main()?


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


@contextmanager
def loading() -> Iterator[None]:
    """Around the loading a command does before its work (imports, the yard's files): no collections
    in it, in a `blockyard` process; then what it loaded is frozen like the start's."""
    if not _process:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        settle()
