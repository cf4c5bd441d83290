"""The state database under stress: another process holding its write lock, and a file that is not a
usable database. Every command says what happened in one `error:` line and exits 1 — never an
internal error (engine/state/database.py decides, docs/cli.md lists the messages)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.state.database import TIMEOUT_ENV
from tests.runtime.conftest import Outcome, spawn

pytestmark = pytest.mark.sqlite_only(
    "about the SQLite file: its write lock, busy timeout, damaged files and folders"
)

Cli = Callable[..., Outcome]

FILES = {
    "blocks/inc.yaml": """
        block: inc
        kind: transform
        inputs: {n: {type: integer, default: 0}}
        outputs: {n: {type: integer}}
        compute: {n: "n + 1"}
    """,
    "blocks/answer.yaml": """
        block: answer
        kind: transform
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        compute: {reply: "'you said: ' ~ message"}
    """,
    "flows/count.yaml": """
        flow: count
        outputs: [n]
        steps:
          - {id: inc, uses: inc}
    """,
    "flows/ask.yaml": """
        flow: ask
        outputs: [n]
        steps:
          - {id: ok, approval: {message: "Go on?"}}
          - {id: inc, uses: inc}
    """,
    "flows/timed.yaml": """
        flow: timed
        outputs: [n]
        steps:
          - {id: ok, approval: {message: "Go on in time?", timeout: 10ms, on_timeout: reject}}
          - {id: inc, uses: inc}
    """,
    "flows/chat.yaml": """
        flow: chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: answer, uses: answer}
    """,
}

# A second process that takes the write lock and keeps it until its stdin is closed.
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""

WAIT = "0.2"  # seconds a command waits for the lock here (BLOCKYARD_DB_TIMEOUT)


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(FILES)


def state_db(root: Path) -> Path:
    return root.resolve() / ".blockyard" / "state.db"


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another process holds `path`'s write lock (BEGIN IMMEDIATE) for the length of the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n", (
            holder.communicate()[1]
        )
        yield
    finally:
        holder.communicate(timeout=30)  # closes its stdin: it commits nothing and exits


def locked_message(command: str, root: Path) -> str:
    return (
        f"error: {command}: the state database {state_db(root)} is locked by another process "
        f"(waited {WAIT} s for a write lock; BLOCKYARD_DB_TIMEOUT=SECONDS changes how long)\n"
    )


def waiting_run(cli: Cli, root: Path, flow: str) -> str:
    started = cli(root, "run", flow, "--json")
    assert started.code == 3, started.err
    return str(started.events()[0]["run_id"])


@pytest.fixture
def prepared(yard: Path, cli: Cli) -> dict[str, str]:
    """A yard whose database holds a waiting run, a timed-out gate and a preference."""
    ids = {"waiting": waiting_run(cli, yard, "ask"), "timed": waiting_run(cli, yard, "timed")}
    assert cli(yard, "memory", "set", "users/ada", "lunch", "soup").code == 0
    time.sleep(0.02)  # the timed gate's 10 ms pass
    return ids


WRITERS = [
    ("run", ["run", "count"]),
    ("run", ["run", "chat", "--thread", "t1", "--input", "message=hi"]),
    ("resume", ["resume", "{waiting}", "--approve"]),
    ("memory set", ["memory", "set", "users/ada", "lunch", "pho"]),
    ("memory delete", ["memory", "delete", "users/ada", "lunch"]),
    ("gates", ["gates", "--expire"]),
]


@pytest.mark.parametrize(
    ("command", "args"), WRITERS, ids=[" ".join(args[:2]) for _, args in WRITERS]
)
def test_a_writer_waits_for_the_lock_then_names_itself_and_exits_1(
    yard: Path,
    cli: Cli,
    prepared: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    args: list[str],
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, WAIT)
    argv = [arg.format(**prepared) for arg in args]
    with write_locked(state_db(yard)):
        began = time.monotonic()
        outcome = cli(yard, *argv)
        took = time.monotonic() - began
    assert (outcome.code, outcome.err) == (1, locked_message(command, yard))
    assert took < 10  # it waited the configured 0.2 s, not the default 30 s
    # nothing was half done: the lock gone, the same command goes through
    again = cli(yard, *argv)
    assert again.code == 0, again.err


def test_resume_and_memory_set_in_separate_processes(
    yard: Path, cli: Cli, prepared: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, WAIT)  # the children inherit it (spawn copies os.environ)
    with write_locked(state_db(yard)):  # both at once: two processes wait on a third
        children = {
            "resume": spawn(yard, "resume", prepared["waiting"], "--approve"),
            "memory set": spawn(yard, "memory", "set", "users/ada", "lunch", "pho"),
        }
        ended = {
            command: (child.communicate(timeout=60), child.returncode)
            for command, child in children.items()
        }
    for command, ((_, err), code) in ended.items():
        assert (code, err) == (1, locked_message(command, yard))
    shown = json.loads(cli(yard, "runs", "show", prepared["waiting"], "--json").out)
    assert shown["run"]["status"] == "waiting"  # the failed resume left the run as it was


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_timeout_setting_is_a_usage_error(
    yard: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, value)
    outcome = cli(yard, "memory", "set", "users/ada", "lunch", "soup")
    assert (outcome.code, outcome.err) == (
        2,
        f"error: {TIMEOUT_ENV}='{value}': expected a number of seconds, 0 or more\n",
    )


# ---- a file that is not a usable database ------------------------------------------------------


def _garbage(path: Path, real: Path) -> str:
    path.write_bytes(bytes(range(256)) * 64)
    return "file is not a database"


def _truncated(path: Path, real: Path) -> str:
    path.write_bytes(real.read_bytes()[: 12 * 1024])  # the header says more pages than there are
    return "database disk image is malformed"


def _directory(path: Path, real: Path) -> str:
    path.mkdir()
    return "it is a directory"


DAMAGE = {"garbage": _garbage, "truncated": _truncated, "directory": _directory}

COMMANDS = [
    ["runs"],
    ["runs", "--status", "failed"],
    ["runs", "show", "r1"],
    ["gates"],
    ["gates", "--json"],
    ["gates", "--expire"],
    ["threads"],
    ["threads", "show", "t1"],
    ["memory", "list", "users/ada"],
    ["memory", "get", "users/ada", "lunch"],
    ["memory", "set", "users/ada", "lunch", "soup"],
    ["memory", "delete", "users/ada", "lunch"],
    ["run", "count"],
    ["resume", "r1"],
]


def fill(cli: Cli, root: Path) -> None:
    """A real, well-filled state database: runs, a waiting gate, a thread, a preference."""
    for args in (
        ["run", "count"],
        ["run", "ask"],
        ["run", "chat", "--thread", "t1", "--input", "message=hi"],
        ["memory", "set", "users/ada", "lunch", "soup"],
    ):
        assert cli(root, *args).code in (0, 3)


@pytest.mark.parametrize("damage", DAMAGE)
def test_every_command_refuses_a_damaged_database_in_one_line(
    yard: Path, cli: Cli, tmp_path: Path, damage: str
) -> None:
    fill(cli, yard)
    path = state_db(yard)
    real = tmp_path / "real.db"
    shutil.copy(path, real)  # the commands above closed it: everything is in the main file
    for leftover in path.parent.glob("state.db*"):
        leftover.unlink()
    reason = DAMAGE[damage](path, real)
    expected = f"error: cannot open the state database {path}: {reason}\n"
    for args in COMMANDS:
        outcome = cli(yard, *args)
        assert (outcome.code, outcome.err) == (1, expected), args


def test_an_empty_file_is_an_empty_database(yard: Path, cli: Cli) -> None:
    # SQLite's own rule (a zero-length file is a database with nothing in it yet): not damage
    path = state_db(yard)
    path.parent.mkdir(parents=True)
    path.touch()
    assert cli(yard, "runs").out == "no runs yet\n"
    assert cli(yard, "run", "count").code == 0
    assert len(cli(yard, "runs").out.splitlines()) == 2


def test_the_folder_of_the_database_cannot_be_made(yard: Path, cli: Cli) -> None:
    (yard / ".blockyard").write_text("not a folder", encoding="utf-8")
    outcome = cli(yard, "memory", "set", "users/ada", "lunch", "soup")
    assert outcome.code == 1
    assert outcome.err.startswith(f"error: cannot open the state database {state_db(yard)}: ")
    assert (yard / ".blockyard").is_file()


def test_serve_refuses_a_damaged_database_before_it_binds(yard: Path, cli: Cli) -> None:
    # the server opened the database in its startup hook: uvicorn printed a traceback and exited 3
    path = state_db(yard)
    path.parent.mkdir(parents=True)
    _garbage(path, path)
    outcome = cli(yard, "serve", "--port", "1")
    assert outcome.code == 1
    assert outcome.err == f"error: cannot open the state database {path}: file is not a database\n"
    assert "Traceback" not in outcome.err
