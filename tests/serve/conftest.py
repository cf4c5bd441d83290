"""Fixtures for the server tests (helpers live in serve_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.serve.server import Settings
from tests.serve.browser import browser, page  # noqa: F401  (the browser tests' fixtures)
from tests.serve.serve_helpers import YARD, Live, start_live


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(YARD)


@pytest.fixture
def serve() -> Iterator[Callable[..., Live]]:
    """serve(root, **settings) -> a running server; every one started is stopped at the end."""
    started: list[Live] = []

    def start(root: Path, **options: Any) -> Live:
        options.setdefault("grace", 5.0)
        options.setdefault("poll", 0.1)
        live = start_live(Settings(root=root, **options))
        started.append(live)
        return live

    yield start
    for live in started:
        if live.thread.is_alive():
            live.stop()
