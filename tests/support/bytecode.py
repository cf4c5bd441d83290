"""One bytecode cache for the suite's processes where Python is told to write none.

With PYTHONDONTWRITEBYTECODE set (some shells and CI images set it), every process the suite starts —
each pytest-xdist worker, each `blockyard` child, each served yard — compiles the engine from source
again, and each worker rewrites and compiles the test modules again: ~0.2 s of CPU per child process and
~10% of a subprocess-heavy test file's CPU, measured on 2 cores. `share()` (called by tests/conftest.py
before the workers start) lets the processes started after it write and read their bytecode in one cache
folder outside the checkout (Python's PYTHONPYCACHEPREFIX; the checkout gets no `__pycache__`), keyed by
each source file's path and checked against its time and size as usual, so an edited module is compiled
afresh. Where bytecode is written already, or a prefix is set, it changes nothing.

The cache is `$BLOCKYARD_TEST_CACHE/pycache`, else `~/.cache/blockyard-tests/pycache` (tests/support/npm.py
keeps its packages beside it). The bytecode of files under the temporary folder (the tests' copies of the
engine, the venvs of tests/test_packaging.py) is of this session only: `share()` drops the previous
sessions' so that the cache does not grow with every run.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

PREFIX_ENV = "PYTHONPYCACHEPREFIX"


def cache_folder() -> Path:
    return (
        Path(os.environ.get("BLOCKYARD_TEST_CACHE") or Path.home() / ".cache" / "blockyard-tests")
        / "pycache"
    )


def share() -> None:
    """Have the processes started from now on share cache_folder(), if Python writes no bytecode here."""
    if not sys.dont_write_bytecode or os.environ.get(PREFIX_ENV):
        return
    folder = cache_folder()
    # the mirror of the temporary folder: the bytecode of earlier sessions' throw-away copies
    shutil.rmtree(
        folder / Path(tempfile.gettempdir()).resolve().relative_to("/"), ignore_errors=True
    )
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[PREFIX_ENV] = str(folder)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
