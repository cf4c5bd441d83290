"""A cold `blockyard run` loads only what the flow needs: no LLM client for a mock-only flow, no
server, no converters of other commands (issue 15, cold start)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from engine.cli import main
from tests.conftest import test_backend
from tests.support.example import REPO, copy_example_yard

# Modules a mock-only `run hello` must not load: the providers' SDKs (each loaded only when a profile
# names it: engine/models/providers/__init__.py), the server, and what only other commands use; the
# memory store (sqlite-vec and numpy: hello has no memory); what only other flows of the yard need
# (croniter for schedules: `run` checks the flow's closure, not the whole yard; RE2 stays, for the regex
# rules of blockyard.yaml's scripted replies, which every flow's check reads: ~3 ms);
# the TaskPlan converter (`run --plan`) and anyio's portal (the sync API); jsonschema and what it loads (a
# reply to the outputs' schema is checked by engine/spec/typecheck.py's schema_verdict); the constructs hello does
# not have (each loads with the first step that needs it: engine/compile/constructs.py) and the agents and
# smart blocks' executors (engine/executors/__init__.py, engine/compile/wired.py); the graph model and its
# drawings (`blockyard graph`).
NOT_NEEDED = (
    "jsonschema",
    "attr",
    "referencing",
    "engine.agents",
    "engine.smart",
    "engine.compile.agent",
    "engine.compile.router",
    "engine.compile.mapping",
    "engine.compile.approval",
    "engine.compile.loop",
    "engine.compile.subflow",
    "engine.executors.agent",
    "engine.executors.smart",
    "langchain_openai",
    "openai",
    "anthropic",
    "langchain_anthropic",
    "langchain_google_genai",
    "google.genai",
    "fastapi",
    "starlette",
    "uvicorn",
    "dspy",
    "mcp",
    "engine.serve",
    "engine.cli.interchange",
    "engine.interchange.reactflow",
    "engine.cli.export",
    "numpy",
    "sqlite_vec",
    "langgraph.store.sqlite",
    "croniter",
    "engine.spec.cron",
    "engine.interchange.taskplan",
    "engine.spec.interchange",
    "anyio.from_thread",
    "engine.compile.draw",
    "engine.compile.flowgraph",
)
# ... and on a state database that is a file, the Postgres client and backend (in the suite's Postgres pass
# the run's database is Postgres: tests/conftest.py)
POSTGRES = ("psycopg", "langgraph.checkpoint.postgres", "engine.state.postgres")
KEYS = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
)


def test_run_hello_on_the_mock_imports_no_client_server_or_converter(tmp_path: Path) -> None:
    root = copy_example_yard(tmp_path / "yard")
    env = {key: value for key, value in os.environ.items() if key not in KEYS}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "engine", "run", "hello"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loud: 'GREET: NAME=WORLD'" in done.stdout
    modules = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    # the measure sees imports
    assert "engine.models.providers.mock" in modules and "langgraph.graph" in modules
    not_needed = NOT_NEEDED if test_backend() == "postgres" else (*NOT_NEEDED, *POSTGRES)
    loaded = sorted(
        m for m in modules if any(m == name or m.startswith(name + ".") for name in not_needed)
    )
    assert loaded == []


# After `blockyard run hello` in a process of its own (main() without arguments, as the `blockyard` script
# calls it): whether the collector is on, and whether what the start loaded was frozen (engine/cli/startup.py).
AFTER_RUN = (
    "import gc, sys\n"
    "from engine.cli import main\n"
    "sys.argv = ['blockyard', 'run', 'hello']\n"
    "code = main()\n"
    "print(code, gc.isenabled(), gc.get_freeze_count() > 0)\n"
)


def test_a_blockyard_process_freezes_what_its_start_loaded_and_runs_with_the_collector_on(
    tmp_path: Path,
) -> None:
    root = copy_example_yard(tmp_path / "yard")
    env = {key: value for key, value in os.environ.items() if key not in KEYS}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", AFTER_RUN],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "0 True True"


# Imports the entry point's module as the `blockyard` script does, and reports what was imported with the
# collector on or off (a finder first on sys.meta_path sees every import, the package before its module) and
# each collection: how many imports had been seen when it ran, and whether it was an explicit gc.collect()
# (a library may call one; that is not the collector running by itself).
IMPORT_PROBE = """\
import gc, importlib, json, sys
seen, ran, explicit = [], [], []
class Seen:
    @staticmethod
    def find_spec(name, path=None, target=None):
        seen.append((name, gc.isenabled()))
collect = gc.collect
def counted_collect(*args, **kwargs):
    explicit.append(True)
    try:
        return collect(*args, **kwargs)
    finally:
        explicit.pop()
gc.collect()
gc.collect = counted_collect
gc.callbacks.append(lambda phase, info: phase == 'start' and ran.append((len(seen), bool(explicit))))
sys.meta_path.insert(0, Seen)
entry = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
print(json.dumps({'seen': seen, 'ran': ran, 'enabled': gc.isenabled(),
                  'cli': 'engine.spec' in sys.modules and 'click' in sys.modules}))
"""


def test_the_blockyard_script_imports_the_cli_with_the_collector_off() -> None:
    """The script pip writes for `blockyard` imports its entry point's module before it calls main():
    everything that module imports (the CLI, pydantic, the spec models) is imported with the collector off,
    so no collection runs by itself during it (engine/console.py).

    Python imports the `engine` package (engine/__init__.py) before the module can turn the collector off:
    collections there depend on how many objects the interpreter's own start left (typing is imported there
    unless a .pth of some installed distribution did it already), so they are not counted; what is checked
    is that nothing but the standard library and the engine's own modules is imported then. Nor is an
    explicit gc.collect() of a library counted: that is not the collector running by itself."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    module, _, function = scripts["blockyard"].partition(":")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, module, function],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    names = [name for name, _ in report["seen"]]
    assert module in names and report["cli"], names
    start = names.index(module) + 1  # the imports of the entry point's module
    before = [
        name
        for name in names[: start - 1]
        if name.partition(".")[0] not in sys.stdlib_module_names
        and name.partition(".")[0] != "engine"
    ]
    assert before == [], "imported with the collector on, before the entry point's module ran"
    on = [name for name, enabled in report["seen"][start:] if enabled]
    assert on == [], "imported by the entry point's module with the collector on"
    # after its first import, the module has turned the collector off: a collection that is not an explicit
    # gc.collect() would mean something turned it on again
    by_itself = [count for count, explicit in report["ran"] if count > start and not explicit]
    assert by_itself == [], [names[count - 1] for count in by_itself]
    assert report["enabled"] is False


def test_main_called_with_arguments_leaves_the_collector_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test (or a program) calling main([...]) in its own process: nothing frozen, the collector as it was.
    The worker froze what its collection loaded (tests/support/collector.py), and a frozen object freed by
    the run lowers the count: so the test starts with nothing frozen and gives the worker its freeze back."""
    root = copy_example_yard(tmp_path / "yard")
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    gc.unfreeze()
    try:
        assert main(["run", "hello", "--root", str(root)]) == 0
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.freeze()
