"""The disk guarantee (docs/runtime.md, "The disk guarantee"): `synchronous: normal | full` per flow
and in blockyard.yaml, what each commit of a run waits for on SQLite (counted with strace: the fsyncs
of the WAL) and on Postgres (the transaction's `synchronous_commit`), and that a kill -9 costs a run
of either level no finished step."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.runtime.yard import Yard
from engine.state import synchronous
from engine.state.checkpointer import StateDB
from engine.state.location import Location
from tests.conftest import skip_or_fail, test_backend
from tests.runtime.conftest import BLOCKS, CONFIG, FLOWS, Outcome, spawn, subprocess_env
from tests.runtime.test_resume import _committed, _read_until, started_steps

Cli = Callable[..., Outcome]
MakeYard = Callable[[dict[str, str]], Path]
STEPS = 12
FEW = STEPS // 2  # fsyncs of a run whose commits wait for no disk: those of closing the database


def _chain(name: str, level: str | None) -> str:
    # one LangGraph node and one checkpoint per step (`inline: false`): a commit per step, each
    # acknowledged before the next step starts (durability sync)
    steps = "".join(f"  - {{id: s{i}, uses: inc}}\n" for i in range(1, STEPS))
    return (
        f"flow: {name}\ninline: false\n"
        + (f"synchronous: {level}\n" if level else "")
        + "inputs: {n: {type: integer, default: 0}}\noutputs: [n]\nsteps:\n"
        + '  - {id: s0, uses: inc, with: {n: "{{ inputs.n }}"}}\n'
        + steps
    )


CHAINS = {
    "flows/plain.yaml": _chain("plain", None),
    "flows/careful.yaml": _chain("careful", "full"),
    "flows/relaxed.yaml": _chain("relaxed", "normal"),
    "flows/crashy_full.yaml": FLOWS["flows/crashy.yaml"].replace(
        "flow: crashy", "flow: crashy_full\n        synchronous: full"
    ),
}


@pytest.fixture
def chains(make_yard: MakeYard) -> Path:
    return make_yard({**BLOCKS, **FLOWS, **CONFIG, **CHAINS})


def _wal_syncs(root: Path, flow: str, tmp: Path) -> int:
    """The fsyncs of the state database's WAL while `blockyard run FLOW` runs, counted by strace."""
    strace = shutil.which("strace")
    if strace is None:
        skip_or_fail("strace is not installed (.ci/debian-packages)")
        raise AssertionError  # unreachable: skip_or_fail raises
    log = tmp / f"{flow}.strace"
    # every thread's (-f), with the file each descriptor is (-y)
    traced = (strace, "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync", "-o")
    done = subprocess.run(
        [*traced, str(log), sys.executable, "-m", "engine", "run", flow, "--json"],
        cwd=root,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "run_finished"
    calls = log.read_text().splitlines()
    assert all(re.search(r"\b(fsync|fdatasync)\(", call) for call in calls), calls[:5]
    return sum("state.db-wal>" in call for call in calls)


@pytest.mark.cpu_heavy(
    "three fresh `blockyard run` interpreters under strace, which stops at every system call"
)
@pytest.mark.sqlite_only("counts the fsyncs of the SQLite file")
def test_a_full_flow_syncs_every_commit_a_normal_one_only_when_the_process_closes(
    chains: Path, tmp_path: Path
) -> None:
    _wal_syncs(chains, "hello", tmp_path)  # the database made first, its creation not counted
    normal = _wal_syncs(chains, "plain", tmp_path)
    full = _wal_syncs(chains, "careful", tmp_path)
    # normal: the WAL is synced when it is copied back into the file (the last connection closing),
    # never at a commit (2 here); full: at every commit, the run's row, each step's checkpoint, its end
    assert normal < FEW, normal
    assert full >= STEPS + normal, (full, normal)


@pytest.mark.cpu_heavy(
    "three fresh `blockyard run` interpreters under strace, which stops at every system call"
)
@pytest.mark.sqlite_only("counts the fsyncs of the SQLite file")
def test_the_yard_default_applies_unless_the_flow_says_otherwise(
    chains: Path, tmp_path: Path
) -> None:
    (chains / "blockyard.yaml").write_text(
        (chains / "blockyard.yaml").read_text() + "synchronous: full\n"
    )
    _wal_syncs(chains, "hello", tmp_path)
    assert _wal_syncs(chains, "plain", tmp_path) >= STEPS
    # (the writes outside the run, made at the yard's level, are synced)
    assert _wal_syncs(chains, "relaxed", tmp_path) < FEW


def test_the_flow_then_the_yard_then_the_program_choose_the_level(chains: Path) -> None:
    (chains / "blockyard.yaml").write_text(
        (chains / "blockyard.yaml").read_text() + "synchronous: full\n"
    )
    with Yard.load(chains) as yard:
        levels = {name: yard.engine.synchronous(yard.bundle(name)) for name in CHAINS_BY_NAME}
    assert levels == {"plain": "FULL", "careful": "FULL", "relaxed": "NORMAL"}
    # the program's own choice (`Yard.load(synchronous=...)`) is the yard's level: blockyard.yaml's is not read
    with Yard.load(chains, synchronous="NORMAL") as yard:
        levels = {name: yard.engine.synchronous(yard.bundle(name)) for name in CHAINS_BY_NAME}
    assert levels == {"plain": None, "careful": "FULL", "relaxed": "NORMAL"}


CHAINS_BY_NAME = ("plain", "careful", "relaxed")


@pytest.mark.parametrize("flow", ["crashy", "crashy_full"])
def test_kill_9_mid_run_loses_no_finished_step_at_either_level(
    chains: Path, cli: Cli, flow: str
) -> None:
    child = spawn(chains, "run", flow, "--input", "n=4", "--json")
    try:
        lines = _read_until(child.stdout, lambda line: '"step_started"' in line and '"nap"' in line)
        _committed(chains, json.loads(lines[0])["run_id"], "nap")  # the kill lands in the 1 s nap
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    run_id = json.loads(lines[0])["run_id"]
    done = cli(chains, "resume", run_id, "--json")
    assert done.code == 0, done.err
    assert started_steps(done.events()) == ["nap", "last"]  # `first` was kept: not run again
    assert done.events()[-1]["data"]["outputs"] == {"n": 5, "label": "small"}


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Callable[[str], StateDB]]:
    opened: list[StateDB] = []

    def open_(base: str) -> StateDB:
        url = os.environ.get("BLOCKYARD_DATABASE_URL")
        where = Location(tmp_path / f"{base}.db", url) if url else tmp_path / f"{base}.db"
        db = StateDB(where, synchronous=base)
        opened.append(db)
        return db

    yield open_
    for db in opened:
        db.close()


def _level_of_a_transaction(db: StateDB) -> str:
    """What a write transaction of the writer waits for, read inside it."""
    if db.location.url is not None:
        found = db.writer.call_sync(
            lambda conn: conn.execute("SHOW synchronous_commit").fetchone()[0]
        )
        return {"off": "NORMAL", "on": "FULL"}[found]
    number = db.writer.call_sync(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0])
    return synchronous.LEVELS[number]


@pytest.mark.parametrize("base", ["NORMAL", "FULL"])
def test_each_transaction_gets_the_strongest_level_its_writes_ask_for(
    database: Callable[[str], StateDB], base: str
) -> None:
    """On SQLite `PRAGMA synchronous`, on Postgres `synchronous_commit` (both passes run it)."""
    db = database(base)
    other = "FULL" if base == "NORMAL" else "NORMAL"
    assert _level_of_a_transaction(db) == base  # a write outside any run: the yard's
    with synchronous.level(other):
        assert _level_of_a_transaction(db) == other
    assert _level_of_a_transaction(db) == base  # the next transaction is back at the yard's


def test_a_level_is_named_in_sqlites_spelling_or_refused() -> None:
    assert synchronous.checked("full") == "FULL"
    with pytest.raises(ValueError, match=r"synchronous must be one of OFF, NORMAL, FULL, EXTRA"):
        synchronous.checked("always")
    assert synchronous.strongest(iter([None, "FULL", "NORMAL"]), "NORMAL") == "FULL"
    assert synchronous.strongest(iter([None, "NORMAL"]), "FULL") == "FULL"
    assert synchronous.strongest(iter(["NORMAL"]), "FULL") == "NORMAL"  # a flow's own level wins


def test_on_postgres_the_yard_default_is_the_writer_sessions_setting() -> None:
    if test_backend() != "postgres":
        pytest.skip("about Postgres's synchronous_commit: run in the Postgres pass (.ci/test)")
    url = os.environ["BLOCKYARD_DATABASE_URL"]
    for base, expected in (("NORMAL", "off"), ("FULL", "on")):
        db = StateDB(Location(Path("unused.db"), url), synchronous=base)
        try:
            shown = db.writer.call_sync(
                lambda conn: conn.execute("SHOW synchronous_commit").fetchone()[0]
            )
        finally:
            db.close()
        assert shown == expected, base
