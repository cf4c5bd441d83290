"""The tests that never open a state database, and the guard that keeps that list true.

The Postgres pass (BLOCKYARD_TEST_DATABASE=postgres, tests/conftest.py) exists to run the engine's
state database on Postgres; a test that never opens one — validation, compiling, templates, the
model providers, review text, type checks, packaging — runs there exactly as in the SQLite pass and
proves nothing the second time. The test files and folders in STATELESS are
deselected from the Postgres pass at collection (the summary counts them as deselected).

The list is kept true by the SQLite pass: there every test of a listed file runs with
BLOCKYARD_DATABASE_URL naming a "tripwire", a Postgres URL whose server is a listener on 127.0.0.1
that records each connection and closes it. Whatever would open the state database — the engine, the
CLI, a server, a child process (which inherits the environment) — reads that URL, as it would read the
real one in the Postgres pass, and connects there; `state_backend`'s teardown then fails the test
("... is listed as stateless but opened a state database: remove it from the list"), whether or not
the test's own assertions passed. Using the Postgres test cluster (`pg_url`, `postgres_cluster()`) or
asking which pass this is (`test_backend()`) fails it the same way: such a test differs between passes.

A test that sets or clears BLOCKYARD_DATABASE_URL itself escapes the tripwire, but it escapes the
Postgres pass the same way: it runs identically in both, so listing it loses nothing.

To rebuild the list: `BLOCKYARD_TEST_FIND_STATELESS=1 python -m pytest` puts every test behind the
tripwire without failing it, and prints the files (and whole folders) where every test passed without
opening a state database; tests that do open one fail in that run, as they should.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from engine.state.location import URL_ENV

FIND_ENV = "BLOCKYARD_TEST_FIND_STATELESS"
PROPERTY = "stateless_guard"  # the user property a test's report carries in the finding run
OUTPUT = "stateless_deselected"  # what a pytest-xdist worker hands its controller
SYNC_TIMEOUT = 10.0  # seconds the teardown waits for the listener to take its own probe connection

# Files end in .py, folders in / (every file under them, including new ones: the guard checks those too).
# Found by the finding run (below): every test of these passed behind the tripwire without opening a
# state database. Some open a SQLite file by its path (the writer, the saver, the run store) or start a
# server in a module-scoped fixture before any test's URL is set: they run on SQLite in either pass.
STATELESS: tuple[str, ...] = (
    "tests/agents/test_agent_validation.py",
    "tests/compile/",
    "tests/executors/",
    "tests/hostile/",  # their children drop BLOCKYARD_* (hostile_harness.child_env): a SQLite file in both passes
    "tests/models/test_azure_provider.py",
    "tests/models/test_mock_model.py",
    "tests/models/test_mock_plans.py",
    "tests/models/test_mock_values.py",
    "tests/models/test_model_errors.py",
    "tests/models/test_model_imports.py",
    "tests/models/test_model_resolver.py",
    "tests/models/test_model_secrets.py",
    "tests/models/test_openai_provider.py",
    "tests/models/test_reply_rules.py",
    "tests/review/test_diff.py",
    "tests/review/test_diff_formats.py",
    "tests/review/test_diff_mermaid.py",
    "tests/review/test_version_policy.py",
    "tests/runtime/test_durable_saver.py",
    "tests/runtime/test_progress_display.py",
    "tests/runtime/test_run_store.py",
    "tests/runtime/test_standalone_graph.py",
    "tests/runtime/test_writer.py",
    "tests/runtime/test_writer_inline.py",
    "tests/serve/langgraph_api/test_langgraph_sdk_js.py",
    "tests/serve/test_serve_auth.py",
    "tests/serve/test_serve_catalog.py",
    "tests/serve/test_serve_follow.py",
    "tests/serve/test_serve_reload.py",
    "tests/serve/test_serve_schedules.py",
    "tests/smart/test_smart_names.py",
    "tests/test_architecture.py",
    "tests/test_cli_basics.py",
    "tests/test_cli_boundary.py",
    "tests/test_dbfile.py",
    "tests/test_errors.py",
    "tests/test_forkserver.py",
    "tests/test_load.py",
    "tests/test_loopback_clients.py",
    "tests/test_packaging.py",
    "tests/test_redaction.py",
    "tests/test_spec_walk.py",
    "tests/test_stateless_guard_suite.py",
    "tests/test_template_fast.py",
    "tests/test_templates.py",
    "tests/test_typecheck.py",
    "tests/test_typecheck_schema_verdict.py",
    "tests/test_values.py",
    "tests/tools/",
    "tests/validate/",
)


def listed(nodeid: str) -> str | None:
    """The entry of STATELESS that covers the test `nodeid` (a path relative to the repository), if any."""
    path = nodeid.split("::", 1)[0]
    for entry in STATELESS:
        if path == entry or (entry.endswith("/") and path.startswith(entry)):
            return entry
    return None


def finding() -> bool:
    return os.environ.get(FIND_ENV, "").strip().lower() in ("1", "true", "yes")


@dataclass
class Tripwire:
    """A listener on 127.0.0.1 that accepts every connection, records it and closes it at once: what a
    client sees is a server that hung up (psycopg raises at once, nothing waits)."""

    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0), backlog=128))
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _peers: list[int] = field(default_factory=list)  # the client port of each connection accepted, in order
    _probes: int = 0  # how many of them were our own (`connections`)

    def __post_init__(self) -> None:
        threading.Thread(target=self._serve, name="stateless-tripwire", daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        # sslmode/gssencmode disabled: one connection attempt per open, not a retry without encryption
        return (f"postgresql://stateless:tripwire@127.0.0.1:{self.port}/stateless_tripwire"
                "?sslmode=disable&gssencmode=disable&connect_timeout=5")

    def _serve(self) -> None:
        while True:
            conn, peer = self.sock.accept()
            conn.close()
            with self._cond:
                self._peers.append(int(peer[1]))
                self._cond.notify_all()

    def connections(self) -> int:
        """How many connections anyone has made so far. A connection whose connect() has returned sits
        in the kernel's accept queue until the thread takes it; the queue is first in, first out, so
        once our own probe connection has been taken, every earlier one has been counted."""
        with self._cond:
            start = len(self._peers)
        with socket.create_connection(("127.0.0.1", self.port), timeout=SYNC_TIMEOUT) as probe:
            mine = int(probe.getsockname()[1])
            with self._cond:
                if not self._cond.wait_for(lambda: mine in self._peers[start:], timeout=SYNC_TIMEOUT):
                    raise RuntimeError(f"the stateless tripwire on port {self.port} stopped accepting")
                self._probes += 1
                return len(self._peers) - self._probes


_tripwire: Tripwire | None = None
_lock = threading.Lock()


def tripwire() -> Tripwire:
    """This test process's tripwire (one per pytest-xdist worker), started on first use."""
    global _tripwire
    with _lock:
        if _tripwire is None:
            _tripwire = Tripwire()
        return _tripwire


# What the running guarded test did that the tripwire cannot see (conftest's helpers call `note`).
_notes: list[str] | None = None


def note(what: str) -> None:
    """Record that the guarded test now running did something that differs between passes."""
    if _notes is not None and what not in _notes:
        _notes.append(what)


@dataclass
class Verdict:
    opened: int
    notes: list[str]

    def __bool__(self) -> bool:
        return bool(self.opened or self.notes)

    def message(self, entry: str, nodeid: str) -> str:
        what = [f"opened a state database ({self.opened} connection(s) to {URL_ENV})"] if self.opened else []
        return (f"{entry} is listed as stateless (tests/support/stateless.py) but {nodeid} "
                f"{' and '.join([*what, *self.notes])}: remove it from the list")


@contextmanager
def watching(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Verdict]]:
    """Point BLOCKYARD_DATABASE_URL at the tripwire for the block; the list it yields holds the block's
    Verdict afterwards (connections made during it, notes taken)."""
    global _notes
    wire = tripwire()
    monkeypatch.setenv(URL_ENV, wire.url)
    before = wire.connections()
    verdicts: list[Verdict] = []
    _notes = []
    try:
        yield verdicts
    finally:
        notes, _notes = _notes, None
        verdicts.append(Verdict(wire.connections() - before, notes))


@contextmanager
def guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The SQLite pass's part of `state_backend` for a test that is listed (or for every test in the
    finding run): run it behind the tripwire, then fail it — or, finding, record what it did."""
    entry = listed(request.node.nodeid)
    find = finding()
    if entry is None and not find:
        yield
        return
    with watching(monkeypatch) as verdicts:
        yield
    verdict = verdicts[0]
    if find:
        request.node.user_properties.append((PROPERTY, "stateful" if verdict else "stateless"))
    elif verdict:
        pytest.fail(verdict.message(entry or "", request.node.nodeid), pytrace=False)


# ---- the finding run: which files never opened a state database ----------------------------------

@dataclass
class Findings:
    stateful: set[str] = field(default_factory=set)  # files where some test failed, skipped or opened one
    seen: set[str] = field(default_factory=set)

    def add(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.seen.add(path)
        # failed (it opened one and got an error, or it differs with a Postgres URL set) or skipped
        # (it may run only in one pass): not listed
        if not report.passed:
            self.stateful.add(path)
        if report.when == "teardown" and dict(report.user_properties).get(PROPERTY) != "stateless":
            self.stateful.add(path)

    def entries(self) -> list[str]:
        """The stateless files, a folder's files collapsed to the folder when all of them are."""
        stateless = self.seen - self.stateful
        folders = {path[:index + 1] for path in self.seen for index, char in enumerate(path) if char == "/"}
        folders.discard("tests/")  # the whole suite is never one entry
        whole = {folder for folder in folders if not any(path.startswith(folder) for path in self.stateful)}
        outermost = {folder for folder in whole if not any(other != folder and folder.startswith(other)
                                                           for other in whole)}
        return sorted(outermost | {path for path in stateless
                                   if not any(path.startswith(folder) for folder in outermost)})


@dataclass
class Deselected:
    """A test a pytest-xdist worker deselected, as its controller's summary counts it (it has no items)."""

    nodeid: str


# ---- the plugin: tests/conftest.py registers it ----------------------------------------------------

class Plugin:
    """Deselects the listed tests in the Postgres pass (and says so in the summary, which pytest-xdist's
    controller would otherwise not count: the workers collect), and reports the finding run."""

    def __init__(self, config: pytest.Config, backend: str) -> None:
        self.config = config
        self.backend = backend
        self.deselected: list[str] = []
        self.findings = Findings() if finding() else None
        if self.findings is not None:
            # hundreds of tests fail in the finding run (those that open a state database): plain Python
            # tracebacks, not pytest's source excerpts (parsing the source of one deep failure crashed them)
            config.option.tbstyle = "native"
        self.counted = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.backend != "postgres":
            return
        keep = [item for item in items if listed(item.nodeid) is None]
        dropped = [item for item in items if listed(item.nodeid) is not None]
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
            items[:] = keep
            self.deselected = [item.nodeid for item in dropped]

    def pytest_sessionfinish(self) -> None:
        output = getattr(self.config, "workeroutput", None)
        if output is not None:  # a pytest-xdist worker: the controller counts what it deselected
            output[OUTPUT] = self.deselected

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object) -> None:
        """The controller: every worker collected (and deselected) the same tests; count them once."""
        deselected = list(getattr(node, "workeroutput", {}).get(OUTPUT, []))
        if self.counted or not deselected:
            return
        self.counted = True
        self.deselected = deselected
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.stats.setdefault("deselected", []).extend(Deselected(nodeid) for nodeid in deselected)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.findings is not None and not hasattr(self.config, "workerinput"):
            self.findings.add(report)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.deselected:
            terminalreporter.write_line(
                f"Postgres pass: {len(self.deselected)} tests deselected, listed as stateless in "
                "tests/support/stateless.py (they never open a state database; the SQLite pass checks that)")
        if self.findings is not None:
            terminalreporter.section("stateless: no test opened a state database (tests/support/stateless.py)")
            for entry in self.findings.entries():
                terminalreporter.write_line(f"    {entry!r},")
