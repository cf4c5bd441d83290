"""Hostile command lines and hostile files: no internal error, no traceback, no hang, bounded memory.

Every case runs the real CLI boundary (`engine.cli.main`) in a child process watched by a
watchdog (see hostile_harness.py). The files corpus mutates one file of the example yard per
case, in hundreds of generated ways, and then validates the yard and runs a flow of it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.hostile.hostile_corpus import cli_cases, file_cases
from tests.hostile.hostile_harness import run_cases
from tests.support.example import copy_example_yard

FILE_CASES = int(os.environ.get("BLOCKYARD_HOSTILE_FILES", "160"))


def test_hostile_command_lines_get_clear_answers(tmp_path: Path) -> None:
    yard = copy_example_yard(tmp_path / "yard")
    outside = tmp_path / "secret.txt"
    outside.write_text("TOKEN=do-not-print-me\n", encoding="utf-8")
    report = run_cases(cli_cases(yard, outside), tmp_path)
    assert not report.failures(), report.summary()
    for outcome in report.outcomes:
        assert "do-not-print-me" not in outcome.out + outcome.err, outcome.describe()


def test_hostile_files_get_clear_answers(tmp_path: Path) -> None:
    report = run_cases(file_cases(tmp_path, FILE_CASES, seed=9), tmp_path)
    assert len(report.outcomes) >= 2 * FILE_CASES
    assert not report.failures(), report.summary()
