"""The limit on a test's CPU (tests/support/cpu.py), in a whole pytest run of a small suite with the
suite's own plugin and a limit of half a second: a test whose body spends more fails, naming what it
spent and what to do, its child processes counted; one marked `cpu_heavy` with a reason passes; a mark
without a reason fails; the end of the run lists the dearest test bodies."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from tests.conftest import REPO
from tests.support import child_pytest

CONFTEST = """
    from tests.support import cpu

    cpu.LIMIT = 0.5


    def pytest_configure(config):
        config.addinivalue_line("markers", "cpu_heavy(reason): may spend more")
        config.pluginmanager.register(cpu.Plugin(), "cpu")
"""

SUITE = """
    import subprocess
    import sys
    import time

    import pytest

    SPIN = "import time\\nend = time.process_time() + 0.8\\nwhile time.process_time() < end:\\n    pass\\n"


    def spin():
        end = time.process_time() + 0.8
        while time.process_time() < end:
            pass


    def test_cheap():
        assert sum(range(10)) == 45


    def test_spins_in_its_body():
        spin()


    def test_spins_in_a_child():
        assert subprocess.run([sys.executable, "-c", SPIN]).returncode == 0


    @pytest.mark.cpu_heavy("spins on purpose, to show the mark")
    def test_marked_and_explained():
        spin()


    @pytest.mark.cpu_heavy
    def test_marked_without_a_reason():
        assert True
"""


def test_a_test_over_the_limit_fails_unless_marked_and_explained(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST).lstrip(), encoding="utf-8")
    (tmp_path / "test_suite.py").write_text(textwrap.dedent(SUITE).lstrip(), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}  # the summary's lines whole
    run = child_pytest.run(tmp_path, env, "-rf")
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "3 failed, 2 passed" in out, out
    for name in ("test_spins_in_its_body", "test_spins_in_a_child"):
        assert f"FAILED test_suite.py::{name} - the test's body spent " in out, out
    assert "more than the 0.5 s a test may spend unmarked: make it cheaper, or mark it" in out, out
    assert (
        "FAILED test_suite.py::test_marked_without_a_reason - @pytest.mark.cpu_heavy needs a reason"
    ) in out, out
    listed = out.split("the 10 test bodies that spent the most CPU", 1)[1].splitlines()[1:4]
    assert sorted(line.split()[-1] for line in listed) == [
        "test_suite.py::test_marked_and_explained",
        "test_suite.py::test_spins_in_a_child",
        "test_suite.py::test_spins_in_its_body",
    ], out
    assert all(0.7 <= float(line.split("s cpu")[0]) < 5 for line in listed), out
