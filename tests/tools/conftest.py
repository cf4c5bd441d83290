"""Fixtures for tool tests: yards with Python tool code, a loopback HTTP server, clean imports."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.spec import ConfigSpec
from tests.tools.tool_helpers import LoopbackServer


@pytest.fixture(autouse=True)
def restore_imports(tmp_path: Path) -> Iterator[None]:
    """Tool loading puts yard folders on sys.path and imports their modules: undo it after each test."""
    path, before = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - before:  # only the yard's modules: SDKs imported meanwhile stay
        file = getattr(sys.modules[name], "__file__", None)
        if file and Path(file).resolve().is_relative_to(tmp_path.resolve()):
            del sys.modules[name]


@pytest.fixture
def code_yard(tmp_path: Path) -> Callable[..., tuple[ConfigSpec, Path]]:
    """code_yard({"tools.py": "..."}, tools={"name": {"import": "tools:fn"}}) -> (config, root)."""

    def make(
        files: dict[str, str], *, code: str = "code", **config: Any
    ) -> tuple[ConfigSpec, Path]:
        root = tmp_path / "yard"
        for name, text in files.items():
            path = root / code / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        (root / code).mkdir(parents=True, exist_ok=True)
        return ConfigSpec.model_validate({"paths": {"code": code}, **config}), root

    return make


@pytest.fixture
def web() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    server.thread.start()
    yield server
    server.server.stopping.set()  # type: ignore[attr-defined]
    server.server.shutdown()
    server.server.server_close()
