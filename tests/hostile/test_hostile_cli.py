"""Hostile command lines: no internal error, no traceback, no hang, bounded memory.

Every case runs the real CLI boundary (`engine.cli.main`) in a child process watched by a
watchdog (see hostile_harness.py). Hostile files (the example yard with one file mutated, in
hundreds of generated ways) are in test_hostile_files_1.py and test_hostile_files_2.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.hostile.hostile_corpus import cli_cases
from tests.hostile.hostile_harness import run_cases
from tests.support.example import copy_example_yard


def test_hostile_command_lines_get_clear_answers(tmp_path: Path) -> None:
    yard = copy_example_yard(tmp_path / "yard")
    outside = tmp_path / "secret.txt"
    outside.write_text("TOKEN=do-not-print-me\n", encoding="utf-8")
    report = run_cases(cli_cases(yard, outside), tmp_path)
    assert not report.failures(), report.summary()
    for outcome in report.outcomes:
        assert "do-not-print-me" not in outcome.out + outcome.err, outcome.describe()
