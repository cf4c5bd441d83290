"""The guard of the stateless list (tests/support/stateless.py), in whole pytest runs of a small suite
with the suite's own `state_backend` and plugin: in the SQLite pass a listed test runs behind the
tripwire and fails at teardown when it opened a state database, in this process or in a child, even
when it expected the error itself; the Postgres pass does not collect a listed file (unless it is named
on the command line: then it deselects its tests), deselects the listed test functions, and counts both
in its summary, pytest-xdist workers or not.

Listed as stateless itself: each run is a child pytest whose backend the test sets and whose
environment has no BLOCKYARD_DATABASE_URL, so it runs the same in either pass of this suite (the two
child runs cost ~4 s of CPU: once is enough)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from engine.state.location import URL_ENV
from tests.conftest import BACKEND_ENV, REPO
from tests.support import child_pytest, stateless
from tests.test_stateless_guard import OPEN_IN_CHILD

CONFTEST = """
    from tests.conftest import pytest_configure, state_backend  # noqa: F401  the suite's own
    from tests.support import child_pytest, stateless

    stateless.STATELESS = ("test_listed.py", "test_unlisted.py::test_opens_nothing_here",
                           "test_unlisted.py::test_listed_alone_but_opens_one")
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
    import pytest

    from engine.state import backends
    from engine.state.database import StateError
    from engine.state.location import locate


    def test_opens_its_sqlite_file(tmp_path):
        backends.check(locate(tmp_path / "state.db"))


    @pytest.mark.parametrize("word", ["one", "two"])
    def test_opens_nothing_here(word):
        assert word.upper() != word


    def test_listed_alone_but_opens_one(tmp_path):
        with pytest.raises(StateError):
            backends.check(locate(tmp_path / "state.db"))
"""


def _pytest(folder: Path, backend: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value for key, value in os.environ.items() if key not in (URL_ENV, stateless.FIND_ENV)
    }
    env.update({BACKEND_ENV: backend, "PYTHONPATH": str(REPO)})
    # only xdist of the installed plugins, as in the suite
    return child_pytest.run(folder, env, *args, plugins=("xdist",))


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A small suite with the real `state_backend` and plugin, whose list names test_listed.py."""
    for name, text in (
        ("pytest.ini", "[pytest]\n"),
        ("conftest.py", CONFTEST),
        ("test_listed.py", LISTED),
        ("test_unlisted.py", UNLISTED),
    ):
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return tmp_path


def test_the_sqlite_pass_fails_a_listed_test_that_opens_a_state_database(suite: Path) -> None:
    run = _pytest(suite, "sqlite", "-n", "0", "-rE")
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "7 passed, 3 errors" in out, out
    for entry, name in (
        ("test_listed.py", "test_listed.py::test_opens_one_and_expects_the_error"),
        ("test_listed.py", "test_listed.py::test_a_child_opens_one_and_expects_the_error"),
        (
            "test_unlisted.py::test_listed_alone_but_opens_one",
            "test_unlisted.py::test_listed_alone_but_opens_one",
        ),
    ):
        assert f"ERROR {name} - Failed: " in out, out
        assert (
            f"ERROR at teardown of {name.split('::')[1]} _" in out
            and f"\n{entry} is listed as stateless (tests/support/stateless.py) but {name} "
            "opened a state database (1 connection(s) to BLOCKYARD_DATABASE_URL): remove it from the list\n"
            in out
        ), out
    assert "ERROR test_listed.py::test_opens_nothing" not in out
    assert "ERROR test_unlisted.py::test_opens_its" not in out
    assert "ERROR test_unlisted.py::test_opens_nothing" not in out


def test_the_postgres_pass_deselects_the_tests_of_a_listed_file_it_is_asked_for_and_counts_them(
    suite: Path,
) -> None:
    run = _pytest(suite, "postgres", "-n", "1", "test_listed.py")
    out = run.stdout
    assert run.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, out + run.stderr
    assert "3 deselected" in out, out
    assert (
        "Postgres pass: 3 tests deselected, listed as stateless in tests/support/stateless.py (they never "
        "open a state database; the SQLite pass checks that)"
    ) in out, out


def test_the_postgres_pass_does_not_collect_a_listed_file_and_counts_it(suite: Path) -> None:
    run = _pytest(suite, "postgres", "-n", "1", "--collect-only", "-q")
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "test_listed.py" not in out.split("listed as stateless")[0], out
    # test_listed.py's 3 tests were never collected
    assert "1/4 tests collected (3 deselected)" in out, out
    assert (
        "Postgres pass: 1 file or folder not collected and 3 tests deselected, listed as stateless in "
        "tests/support/stateless.py (they never open a state database; the SQLite pass checks that)"
    ) in out, out


def test_the_postgres_pass_deselects_listed_test_functions_and_keeps_the_rest_of_their_file(
    suite: Path,
) -> None:
    run = _pytest(suite, "postgres", "-n", "0", "--collect-only", "-q", "test_unlisted.py")
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "test_unlisted.py::test_opens_its_sqlite_file" in out.splitlines(), out
    assert "test_opens_nothing_here" not in out and "test_listed_alone" not in out, out
    assert "1/4 tests collected (3 deselected)" in out, out
    # test_listed.py, beside the file asked for, was not asked for: it is not counted as left out
    assert "Postgres pass: 3 tests deselected, listed as stateless" in out, out
