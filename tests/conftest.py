"""Shared fixtures: a throw-away yard written from a dict of files, and the state database's backend.

The suite runs once per backend (`.ci/run`): as it is, every yard's state database is its SQLite
file; with BLOCKYARD_TEST_DATABASE=postgres every test that can touch a state database gets a fresh
database of a throw-away Postgres cluster (tests/support/postgres.py) through BLOCKYARD_DATABASE_URL,
which the engine, the CLI and child processes all follow (engine/state/location.py). A test about the
SQLite file itself (WAL, its locks, a damaged file) is marked `@pytest.mark.sqlite_only("why")` and
runs in the first pass only (the second deselects it at collection).

The tests that never open a state database are listed in tests/support/stateless.py and left out of
the Postgres pass at collection (listed files and folders are not collected, listed functions are
deselected), where they would only repeat the SQLite pass. The SQLite pass
keeps the list true: `state_backend` runs each listed test with BLOCKYARD_DATABASE_URL pointing at a
tripwire (a listener on 127.0.0.1 that records every connection and hangs up) and fails it at
teardown if anything — the test, the engine, a child process — connected, or if it used the Postgres
cluster or asked which pass this is. `BLOCKYARD_TEST_FIND_STATELESS=1 python -m pytest` prints what
the list should hold."""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from engine.state.location import URL_ENV
from tests.support import bytecode, collector, cpu, processes, stateless
from tests.support.cli import Cli, in_process

if TYPE_CHECKING:
    from tests.support.postgres import Cluster

REPO = Path(__file__).resolve().parents[1]


BACKEND_ENV = "BLOCKYARD_TEST_DATABASE"


def test_backend() -> str:
    """The backend this run of the suite puts state databases on: sqlite (the default) or postgres."""
    backend = os.environ.get(BACKEND_ENV, "sqlite").strip().lower() or "sqlite"
    if backend not in ("sqlite", "postgres"):
        raise pytest.UsageError(f"{BACKEND_ENV}={backend!r}: expected sqlite or postgres")
    # a listed test must not differ by pass
    stateless.note("asks which pass this is (test_backend())")
    return backend


test_backend.__test__ = False  # type: ignore[attr-defined]  # not a test: pytest collects test_* names


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded (the engine, LangGraph, every test module) is frozen out of the garbage
    collector's reach: full collections scan only what the tests make (tests/support/collector.py)."""
    collector.freeze()


# The test files that take longest (most test time first; measured with --durations on 2 cores, 4 workers,
# then re-estimated after the speed-ups of issue 10: the hostile files corpus in two halves, the schema
# verdict test's strategies built once, fewer engine subprocesses), in either pass: a file's place is its
# longer time of the two (the Postgres pass runs no stateless file, and some files are much slower there:
# the replicas, which run there only, and files of many tests, each on its own database). pytest-xdist hands
# out whole files (`--dist loadfile`) in collection order (`--no-loadscope-reorder` in pyproject.toml):
# these go first, so that no worker is still on one of them at the end while the others idle — by default
# xdist sends files with many tests first, which put the longest one (two tests) last. The other files
# follow, most tests first.
HEAVY_FIRST = (
    # the docs' walks (tests/support/docs_walk.py): each page's commands in a copy of the repository, its own
    # .venv made first; one file per walk, so that workers walk the pages side by side
    "tests/docs/test_walk_others.py",  # the how-to guides, one after another
    "tests/docs/test_walk_readme.py",
    "tests/docs/test_walk_tutorial.py",
    "tests/docs/test_walk_contributing.py",  # the suite's command, narrowed, on both backends
    "tests/docs/test_walk_langgraph_server.py",
    "tests/telemetry/test_phoenix.py",  # ~60 s: Arize Phoenix in its own process (once per module), two runs
    "tests/runtime/test_export_langgraph_server.py",
    "tests/runtime/test_map_kill_trace.py",
    "tests/serve/test_serve_queue.py",
    "tests/hostile/test_hostile_files_1.py",
    "tests/hostile/test_hostile_files_2.py",
    "tests/serve/test_serve_ops.py",
    "tests/serve/test_serve_browser.py",
    "tests/serve/test_serve_timeline.py",
    "tests/runtime/test_resume.py",
    "tests/serve/test_serve_replicas.py",
    "tests/test_packaging.py",
    "tests/threads/test_conversation.py",
    "tests/runtime/test_yard_api.py",
    "tests/serve/test_serve_hostile.py",
    "tests/approvals/test_race_and_recovery.py",
    "tests/hostile/test_hostile_http.py",
    "tests/runtime/test_durability.py",
    "tests/serve/test_serve_lifecycle.py",
    "tests/interchange/test_reactflow_roundtrip.py",
    "tests/approvals/test_decisions.py",
    "tests/serve/test_serve_sse.py",
    "tests/serve/langgraph_api/test_langgraph_sdk.py",
    "tests/interchange/test_reactflow_import.py",
    "tests/agents/test_mcp_tools.py",
    "tests/serve/test_serve_threads.py",
    "tests/models/test_google_provider.py",
    "tests/test_typecheck_schema_verdict.py",
    "tests/serve/test_serve_api.py",
    "tests/hostile/test_hostile_cli.py",
    "tests/runtime/test_hostile_values.py",
    "tests/threads/test_threads.py",
    "tests/runtime/test_accumulate.py",
    "tests/runtime/test_standalone_graph.py",
    "tests/agents/test_agent_openai.py",
    "tests/runtime/test_cold_start.py",
    "tests/review/test_diff_server.py",
    "tests/test_postgres_cluster.py",
    "tests/serve/test_serve_responsiveness.py",
    "tests/test_action.py",  # the action's steps as a runner runs them: a pip install, three pull requests
    "tests/evals/test_eval_base_head.py",  # `blockyard eval --base` as processes, on real git repositories
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The order files are handed to workers in: HEAVY_FIRST, then by number of tests (see above).
    Each file's tests stay together and in their order (module-scoped fixtures are set up once)."""
    heavy = {name: rank for rank, name in enumerate(HEAVY_FIRST)}
    files = [item.nodeid.split("::", 1)[0] for item in items]
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, name in enumerate(files):
        counts[name] = counts.get(name, 0) + 1
        first.setdefault(name, index)
    keys = {name: (heavy.get(name, len(heavy)), -counts[name], first[name]) for name in counts}
    order = sorted(range(len(items)), key=lambda index: (keys[files[index]], index))
    items[:] = [items[index] for index in order]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): about the SQLite file itself; not run on Postgres"
    )
    config.addinivalue_line(
        "markers", "postgres: needs a Postgres server (tests/support/postgres.py)"
    )
    config.addinivalue_line(
        "markers",
        "cpu_heavy(reason): may spend more than tests/support/cpu.py's LIMIT of CPU; says why",
    )
    config.pluginmanager.register(cpu.Plugin(), "cpu")
    config.pluginmanager.register(stateless.Plugin(config, test_backend()), "stateless")
    bytecode.share()  # before pytest-xdist starts its workers (at session start): they share it too
    # A suite started in the background of a shell without job control (`pytest &`, nohup) inherits an
    # ignored SIGINT, and so would every child process: the tests that press Ctrl-C on a `blockyard run`
    # or `watch` would see it shrugged off. A handled signal is reset to the default in an exec'd child.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # the fork server for the tests' Python children (tests/support/processes.py), started by the process
    # that starts pytest-xdist's workers: they share it. A session in one process (`-n 0`) starts it only
    # when a test first needs it.
    if not hasattr(config, "workerinput"):
        if not config.getoption("numprocesses", None):
            processes.start_on_first_use()
            config.add_cleanup(processes.stop_started)
        else:
            server = processes.start()
            if server is not None:
                config.add_cleanup(lambda: processes.stop(server))


def postgres_cluster() -> Cluster:
    """This worker's throw-away cluster; a missing Postgres skips locally and fails in CI."""
    stateless.note("uses the Postgres test cluster")
    try:
        # psycopg and the cluster's tools: only for tests that use Postgres (the suite runs without them)
        from tests.support import postgres
    except ImportError as exc:
        skip_or_fail(f"the Postgres client is not installed ({exc}; pip install -e '.[dev]')")
        raise
    try:
        return postgres.cluster()
    except postgres.Unavailable as exc:
        skip_or_fail(str(exc))
        raise  # unreachable: skip_or_fail raises


@pytest.fixture(autouse=True)
def state_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Put this test's state databases on the backend of this run (see the module's docstring); on
    Postgres, the test's database is dropped after it (once nothing uses it any more). On SQLite a test
    listed as stateless runs behind the tripwire: this fixture's teardown fails it if it opened one.

    The URL is set through the test's own `monkeypatch` (the same object: it is set up before this
    fixture and undone after it), so a test that sets or clears BLOCKYARD_DATABASE_URL itself wins in
    both passes alike."""
    backend = test_backend()
    if backend != "postgres":
        monkeypatch.delenv(URL_ENV, raising=False)
        # a test listed as stateless runs behind the tripwire: failed if it opens a state database
        with stateless.guard(request, monkeypatch):
            yield backend
        return
    # (a test marked sqlite_only never gets here: the Postgres pass deselects it, tests/support/stateless.py)
    cluster = postgres_cluster()
    url = cluster.fresh_database()
    monkeypatch.setenv(URL_ENV, url)
    yield backend
    cluster.discard(url)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database (no runs) of this worker's Postgres cluster (skips locally without Postgres);
    dropped after the test, like the test's own."""
    cluster = postgres_cluster()
    url = cluster.fresh_database()
    yield url
    cluster.discard(url)


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
