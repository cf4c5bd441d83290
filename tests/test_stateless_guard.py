"""The guard of the stateless list (tests/support/stateless.py): in the SQLite pass a listed test runs
behind the tripwire and fails at teardown when it opened a state database, in this process or in a
child, even when it expected the error itself; the Postgres pass deselects the listed tests and counts
them in its summary, pytest-xdist workers or not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.state.checkpointer import StateDB
from engine.state.database import StateError
from engine.state.location import URL_ENV, locate
from tests.conftest import BACKEND_ENV, REPO, postgres_cluster, test_backend
from tests.support import stateless

# what a child process runs to open the state database the way the CLI's readers do
OPEN_IN_CHILD = ("from pathlib import Path; from engine.state import backends; "
                 "from engine.state.location import locate; backends.check(locate(Path('state.db')))")


def test_a_state_database_opened_in_this_process_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with stateless.watching(monkeypatch) as verdicts, pytest.raises(StateError, match="cannot connect"):
        StateDB(locate(tmp_path / "state.db"))
    (verdict,) = verdicts
    assert verdict.opened == 1 and verdict.notes == []
    assert verdict.message("tests/x.py", "tests/x.py::test_y") == (
        "tests/x.py is listed as stateless (tests/support/stateless.py) but tests/x.py::test_y opened a state "
        "database (1 connection(s) to BLOCKYARD_DATABASE_URL): remove it from the list")


def test_a_child_process_inherits_the_tripwire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with stateless.watching(monkeypatch) as verdicts:
        child = subprocess.run([sys.executable, "-c", OPEN_IN_CHILD], cwd=tmp_path, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert child.returncode == 1, child.stderr
    assert "cannot connect to the state database" in child.stderr
    assert verdicts[0].opened == 1


def test_validation_behind_the_tripwire_opens_nothing_and_imports_no_psycopg(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only opening a state database reads the URL: `blockyard validate` with one set loads no psycopg."""
    script = ("import sys; from engine.cli import main; code = main(['validate', '--root', sys.argv[1]]); "
              "print(code, 'psycopg' in sys.modules)")
    with stateless.watching(monkeypatch) as verdicts:
        child = subprocess.run([sys.executable, "-c", script, str(REPO)], cwd=tmp_path, capture_output=True,
                               text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert child.stdout.split()[-2:] == ["0", "False"], child.stdout + child.stderr
    assert not verdicts[0]


def test_asking_for_the_pass_or_the_cluster_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    with stateless.watching(monkeypatch) as verdicts:
        test_backend()
        if test_backend() == "postgres":  # the cluster is there only in the Postgres pass (or skips)
            postgres_cluster()
    expected = ["asks which pass this is (test_backend())"]
    if test_backend() == "postgres":
        expected.append("uses the Postgres test cluster")
    assert verdicts[0].opened == 0 and verdicts[0].notes == expected
    assert verdicts[0].message("tests/x.py", "tests/x.py::test_y").endswith(
        "but tests/x.py::test_y asks which pass this is (test_backend()): remove it from the list"
        if len(expected) == 1 else "uses the Postgres test cluster: remove it from the list")


CONFTEST = """
    from tests.conftest import pytest_configure, state_backend  # noqa: F401  the suite's own
    from tests.support import stateless

    stateless.STATELESS = ("test_listed.py",)
"""

LISTED = f"""
    import subprocess
    import sys

    import pytest

    from engine.state.database import StateError
    from engine.state import backends
    from engine.state.location import locate


    def test_opens_one_and_expects_the_error(tmp_path):
        with pytest.raises(StateError):
            backends.check(locate(tmp_path / "state.db"))


    def test_a_child_opens_one_and_expects_the_error(tmp_path):
        assert subprocess.run([sys.executable, "-c", {OPEN_IN_CHILD!r}], cwd=tmp_path).returncode == 1


    def test_opens_nothing():
        assert "validate".upper() == "VALIDATE"
"""

UNLISTED = """
    from engine.state import backends
    from engine.state.location import locate


    def test_opens_its_sqlite_file(tmp_path):
        backends.check(locate(tmp_path / "state.db"))
"""


def _pytest(folder: Path, backend: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in (URL_ENV, stateless.FIND_ENV)}
    env.update({BACKEND_ENV: backend, "PYTHONPATH": str(REPO)})
    # only xdist of the installed plugins, as in the suite (pyproject.toml's addopts say why)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--disable-plugin-autoload",
                           "-p", "xdist", "-o", "addopts=", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A small suite with the real `state_backend` and plugin, whose list names test_listed.py."""
    for name, text in (("pytest.ini", "[pytest]\n"), ("conftest.py", CONFTEST), ("test_listed.py", LISTED),
                       ("test_unlisted.py", UNLISTED)):
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return tmp_path


def test_the_sqlite_pass_fails_a_listed_test_that_opens_a_state_database(suite: Path) -> None:
    run = _pytest(suite, "sqlite", "-n", "0", "-rE")
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "4 passed, 2 errors" in out, out
    for name in ("test_opens_one_and_expects_the_error", "test_a_child_opens_one_and_expects_the_error"):
        assert f"ERROR test_listed.py::{name} - Failed: " in out, out
        assert (f"ERROR at teardown of {name} _" in out and
                f"\ntest_listed.py is listed as stateless (tests/support/stateless.py) but test_listed.py::{name} "
                "opened a state database (1 connection(s) to BLOCKYARD_DATABASE_URL): remove it from the list\n"
                in out), out
    assert "ERROR test_listed.py::test_opens_nothing" not in out and "ERROR test_unlisted" not in out


def test_the_postgres_pass_deselects_the_listed_tests_and_counts_them(suite: Path) -> None:
    run = _pytest(suite, "postgres", "-n", "1", "test_listed.py")
    out = run.stdout
    assert run.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, out + run.stderr
    assert "3 deselected" in out, out
    assert ("Postgres pass: 3 tests deselected, listed as stateless in tests/support/stateless.py (they never "
            "open a state database; the SQLite pass checks that)") in out, out
