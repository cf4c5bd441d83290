"""The CLI in-process, as the tests call it where a separate process proves nothing.

`python -m engine` in a child costs the LangGraph import (1-2 s) every time; the commands are the
same `engine.cli.main` either way. Tests that are about the process boundary (kill -9, two
processes racing, a resume in another process, the entry point itself) still start real ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


Cli = Callable[..., Outcome]


def in_process(capsys: pytest.CaptureFixture[str]) -> Cli:
    """cli(root, "run", "hello") -> Outcome: `blockyard run hello --root ROOT`, in this process."""

    def call(root: Path, *args: str) -> Outcome:
        capsys.readouterr()
        code = main([*args, "--root", str(root)])
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return call
