"""Shared fixtures: a throw-away yard written from a dict of files."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import Cli, in_process

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def make_yard(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """make_yard({"flows/x.yaml": "...", "blocks/b.yaml": "..."}) -> the yard's root."""

    def make(files: dict[str, str]) -> Path:
        root = tmp_path / "yard"
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        (root / "blocks").mkdir(parents=True, exist_ok=True)
        (root / "flows").mkdir(parents=True, exist_ok=True)
        return root

    return make


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """cli(root, "run", "hello") -> Outcome: the real CLI, in-process (tests/support/cli.py)."""
    return in_process(capsys)


def skip_or_fail(reason: str) -> None:
    """Skip a test whose precondition this machine lacks, but fail it in CI (`CI=true`): there a
    missing precondition is a broken setup, and a skip must never hide it."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"precondition missing in CI: {reason}")
    pytest.skip(reason)
