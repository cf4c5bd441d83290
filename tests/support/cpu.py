"""The CPU time each test's body spends, its child processes' included, and a limit on it.

A test that spends more than LIMIT seconds of CPU in its body fails, unless it is marked
`@pytest.mark.cpu_heavy("why it needs that much")` (docs/testing.md, "A test's CPU"): the suite's time on
two cores is the sum of what its tests spend, so a test that grows past the limit is a decision a
reviewer sees, not a drift. What is counted, from the call of the test function to its return:

- the worker process's own CPU (every thread: a server a test started in-process is counted too);
- its child processes that ended and were reaped meanwhile (`RUSAGE_CHILDREN`);
- the Python children the suite's fork server forked for it (tests/support/processes.py), which are not
  this process's children: the server reports each one's CPU with its exit status.

Fixtures' set-up and tear-down are not counted (a module's fixture lands on whichever test comes first);
`--durations` shows them. The controller prints the tests that spent the most at the end of the run, and
writes every test's figure to the file BLOCKYARD_TEST_CPU_REPORT names, if set.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.support import processes

LIMIT = 10.0  # CPU seconds a test's body may spend unmarked
SHOWN = 10  # tests listed at the end, the dearest first
KEY = "cpu_seconds"
REPORT_ENV = "BLOCKYARD_TEST_CPU_REPORT"  # a file to write every test body's CPU to, as JSON
_spent = pytest.StashKey[float]()


def now() -> float:
    """CPU seconds this process, its reaped children and its fork-server children have spent so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + processes.forked_cpu()
    )


class Plugin:
    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        began = now()
        try:
            yield
        finally:  # a failing test's CPU is shown too
            item.stash[_spent] = now() - began

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when != "call" or _spent not in item.stash:
            return report
        spent = item.stash[_spent]
        report.user_properties.append((KEY, spent))
        verdict = judge(item, spent)
        if verdict is not None and report.passed:
            report.outcome = "failed"
            report.longrepr = verdict
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """On the controller too (pytest-xdist hands it the workers' reports, properties and all)."""
        for key, value in report.user_properties:
            if key == KEY and isinstance(value, float):
                self.seen.append((value, report.nodeid))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.seen:
            return
        path = os.environ.get(REPORT_ENV)
        if path:  # every test body's CPU, the dearest first: to see which come near the limit
            ranked = sorted(self.seen, reverse=True)
            Path(path).write_text(
                json.dumps(
                    [{"test": nodeid, "cpu_seconds": round(spent, 3)} for spent, nodeid in ranked],
                    indent=1,
                ),
                encoding="utf-8",
            )
        terminalreporter.write_sep("=", f"the {SHOWN} test bodies that spent the most CPU")
        for spent, nodeid in sorted(self.seen, reverse=True)[:SHOWN]:
            terminalreporter.write_line(f"{spent:7.2f}s cpu  {nodeid}")


def judge(item: pytest.Item, spent: float) -> str | None:
    """Why the test fails for the CPU it spent (None: it does not)."""
    marker = item.get_closest_marker("cpu_heavy")
    if marker is not None:
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
        if isinstance(reason, str) and reason.strip():
            return None
        return "@pytest.mark.cpu_heavy needs a reason: why this test needs that much CPU"
    if spent <= LIMIT:
        return None
    return (
        f"the test's body spent {spent:.1f} s of CPU (its child processes included), more than the "
        f"{LIMIT:g} s a test may spend unmarked: make it cheaper, or mark it "
        '@pytest.mark.cpu_heavy("why") (docs/testing.md, "A test\'s CPU")'
    )
