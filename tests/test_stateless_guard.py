"""The guard of the stateless list (tests/support/stateless.py): the tripwire counts a state database
opened in this process or in a child, and a test asking which pass this is or using the Postgres
cluster; a whole pytest run of a small suite with the guard is in test_stateless_guard_suite.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.state.checkpointer import StateDB
from engine.state.database import StateError
from engine.state.location import locate
from tests.conftest import REPO, postgres_cluster, test_backend
from tests.support import stateless

# what a child process runs to open the state database the way the CLI's readers do
OPEN_IN_CHILD = (
    "from pathlib import Path; from engine.state import backends; "
    "from engine.state.location import locate; backends.check(locate(Path('state.db')))"
)


def test_a_state_database_opened_in_this_process_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        stateless.watching(monkeypatch) as verdicts,
        pytest.raises(StateError, match="cannot connect"),
    ):
        StateDB(locate(tmp_path / "state.db"))
    (verdict,) = verdicts
    assert verdict.opened == 1 and verdict.notes == []
    assert verdict.message("tests/x.py", "tests/x.py::test_y") == (
        "tests/x.py is listed as stateless (tests/support/stateless.py) but tests/x.py::test_y opened a state "
        "database (1 connection(s) to BLOCKYARD_DATABASE_URL): remove it from the list"
    )


def test_a_child_process_inherits_the_tripwire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with stateless.watching(monkeypatch) as verdicts:
        child = subprocess.run(
            [sys.executable, "-c", OPEN_IN_CHILD],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
        )
    assert child.returncode == 1, child.stderr
    assert "cannot connect to the state database" in child.stderr
    assert verdicts[0].opened == 1


def test_validation_behind_the_tripwire_opens_nothing_and_imports_no_psycopg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only opening a state database reads the URL: `blockyard validate` with one set loads no psycopg."""
    script = (
        "import sys; from engine.cli import main; code = main(['validate', '--root', sys.argv[1]]); "
        "print(code, 'psycopg' in sys.modules)"
    )
    with stateless.watching(monkeypatch) as verdicts:
        child = subprocess.run(
            [sys.executable, "-c", script, str(REPO)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
        )
    assert child.stdout.split()[-2:] == ["0", "False"], child.stdout + child.stderr
    assert not verdicts[0]


def test_asking_for_the_pass_or_the_cluster_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    with stateless.watching(monkeypatch) as verdicts:
        test_backend()
        if test_backend() == "postgres":
            # the cluster is there only in the Postgres pass (or skips)
            postgres_cluster()
    expected = ["asks which pass this is (test_backend())"]
    if test_backend() == "postgres":
        expected.append("uses the Postgres test cluster")
    assert verdicts[0].opened == 0 and verdicts[0].notes == expected
    assert (
        verdicts[0]
        .message("tests/x.py", "tests/x.py::test_y")
        .endswith(
            "but tests/x.py::test_y asks which pass this is (test_backend()): remove it from the list"
            if len(expected) == 1
            else "uses the Postgres test cluster: remove it from the list"
        )
    )


def _reports(nodeid: str, verdict: str, outcome: str = "passed") -> list[pytest.TestReport]:
    """What the finding run's controller receives for one test: its call, then its teardown with the verdict."""
    location = (nodeid.split("::", 1)[0], 0, nodeid)
    return [
        pytest.TestReport(nodeid, location, {}, outcome, None, "call"),  # type: ignore[arg-type]
        pytest.TestReport(
            nodeid,
            location,
            {},
            "passed",
            None,
            "teardown",
            user_properties=[(stateless.PROPERTY, verdict)],
        ),
    ]


def test_the_finding_run_lists_whole_folders_and_files_and_the_stateless_functions_of_the_others() -> (
    None
):
    findings = stateless.Findings()
    for nodeid, verdict, outcome in (
        ("tests/quiet/test_a.py::test_one", "stateless", "passed"),
        ("tests/quiet/test_b.py::test_one", "stateless", "passed"),
        ("tests/test_file.py::test_one", "stateless", "passed"),
        ("tests/test_mixed.py::test_opens[sqlite]", "stateful", "passed"),
        ("tests/test_mixed.py::test_half[1]", "stateless", "passed"),
        (
            "tests/test_mixed.py::test_half[2]",
            "stateful",
            "passed",
        ),  # one parameter opens one: not listed
        ("tests/test_mixed.py::test_plain[1]", "stateless", "passed"),
        ("tests/test_mixed.py::test_plain[2]", "stateless", "passed"),
        ("tests/test_mixed.py::test_skipped", "stateless", "skipped"),  # may run in one pass only
        ("tests/test_mixed.py::TestKind::test_method", "stateless", "passed"),
    ):
        for report in _reports(nodeid, verdict, outcome):
            findings.add(report)
    assert findings.entries() == [
        "tests/quiet/",
        "tests/test_file.py",
        "tests/test_mixed.py::TestKind::test_method",
        "tests/test_mixed.py::test_plain",
    ]
    # the suite's own list names neither
    assert stateless.listed("tests/test_mixed.py::test_plain[2]") is None
