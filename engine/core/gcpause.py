"""Bulk work with the cyclic garbage collector paused.

Loading and checking a yard builds hundreds of thousands of small objects (values, positions,
specs, indexes) that all stay alive until the work ends. Every collection their allocation
triggers walks all of them again and frees nothing: that was a sixth of validating 1,000 flows.
Nothing made there is garbage in a cycle that must go before the work ends, so the collector
waits: it runs again when the outermost pause ends (pauses nest, also across threads).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False  # whether the collector was on when the outermost pause began


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off; turn it back on (if it was on) after the last pause."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
