"""The cyclic garbage collector in the suite's processes: what collection loaded is frozen.

Each pytest-xdist worker imports LangGraph, LangChain, pydantic, the engine and every test module (with
their rewritten asserts) before its first test: some 160,000 objects that live as long as the process. At
Python's default thresholds every full collection scanned all of them again, dozens of times per worker,
and pytest's own cleanup at the end of a session collects five times more (0.2-0.9 s each in a worker).
`freeze()` moves them to the collector's permanent generation (gc.freeze), which it never scans; the
collector stays on, at its default thresholds, for everything the tests make. Measured with -n 0 over
tests/compile, tests/runtime and tests/validate: 4.1 s of CPU in the collector before, 2.7 s after.

The engine's own handling of the collector (engine/core/gcpause.py, engine/cli/startup.py) is tested in
processes of its own (tests/runtime/test_cold_start.py, tests/serve/test_serve_collector.py) or by what it
changes (tests/test_gcpause.py), never by the state the worker's collector is in.
"""

from __future__ import annotations

import gc


def freeze() -> None:
    """What the process holds now is never scanned again (its garbage stays: freezing is cheaper than a
    full collection first, and the few cycles left from collection cost only memory)."""
    gc.freeze()
