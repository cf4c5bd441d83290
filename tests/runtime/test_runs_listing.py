"""`blockyard runs` and `runs show`: the table, filters, step summaries — and no LangGraph import."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import Yard
from engine.cli.runs import step_summary
from engine.core.events import RunStatus, Sequencer
from engine.state import backends, migrations, store
from tests.runtime.conftest import Outcome, subprocess_env

Cli = Callable[..., Outcome]


def test_no_runs_yet(yard: Path, cli: Cli) -> None:
    assert cli(yard, "runs").out == "no runs yet\n"


def test_table_filters_and_show(yard: Path, cli: Cli) -> None:
    ok = cli(yard, "run", "calc", "--input", "n=1", "--run-id", "first-run")
    bad = cli(yard, "run", "fragile", "--run-id", "second-run")
    assert (ok.code, bad.code) == (0, 1)
    lines = cli(yard, "runs").out.splitlines()
    assert lines[0].split() == [
        "ID",
        "FLOW",
        "STATUS",
        "STARTED",
        "DURATION",
        "TOKENS",
        "COST",
        "DETAIL",
    ]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["second-run", "fragile@1", "failed"],
        ["first-run", "calc@1", "finished"],
    ]
    assert lines[1].endswith("step 'boom': tool 'explode' failed: RuntimeError: the fuse is lit")
    assert "first-run" not in cli(yard, "runs", "--status", "failed").out
    assert "second-run" not in cli(yard, "runs", "--flow", "calc").out
    assert cli(yard, "runs", "--flow", "nothing").out == "no runs match\n"
    assert len(cli(yard, "runs", "--limit", "1").out.splitlines()) == 2

    shown = cli(yard, "runs", "show", "first-run").out
    assert "status    finished" in shown
    assert "inputs\n  n: 1\n" in shown and "outputs\n  n: 2\n  label: small\n" in shown
    assert "  inc    finished" in shown and "  label  finished" in shown
    body = json.loads(cli(yard, "runs", "show", "first-run", "--json").out)
    assert body["run"]["outputs"] == {"n": 2, "label": "small"}
    assert body["definition"]["files"] == "same"
    assert [s["step"] for s in body["steps"]] == ["inc", "label"]
    assert (
        cli(yard, "runs", "show", "frist-run").err.strip()
        == "error: unknown run 'frist-run' (did you mean 'first-run'?)"
    )


def test_runs_are_listed_by_start_time_whatever_their_ids(yard: Path, cli: Cli) -> None:
    # a chosen id can sort anywhere: "zz-oldest" above every generated id, "00-newest" below
    assert cli(yard, "run", "calc", "--input", "n=1", "--run-id", "zz-oldest").code == 0
    time.sleep(0.002)  # start times have milliseconds: three runs, three times
    generated = cli(yard, "run", "calc", "--input", "n=2", "--json").events()[0]["run_id"]
    time.sleep(0.002)
    assert cli(yard, "run", "calc", "--input", "n=3", "--run-id", "00-newest").code == 0
    newest_first = ["00-newest", generated, "zz-oldest"]
    assert [line.split()[0] for line in cli(yard, "runs").out.splitlines()[1:]] == newest_first
    assert cli(yard, "runs", "--limit", "1").out.splitlines()[1].split()[0] == "00-newest"
    with Yard.open(yard) as api:
        assert [run.id for run in api.runs()] == newest_first
    # the suggestions for a mistyped id come from the newest runs too
    assert "did you mean '00-newest'" in cli(yard, "runs", "show", "00-newset").err


@pytest.mark.sqlite_only("writes the SQLite file by hand")
def test_runs_started_in_the_same_millisecond_keep_one_order(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with backends.reading(path) as conn:
        assert conn is None  # no database yet: nothing is created by looking
    assert not path.exists()
    db = sqlite3.connect(path)
    migrations.migrate(db, "2026-01-01T00:00:00.000Z")
    db.execute("INSERT INTO definitions VALUES ('d', 'f', 1, '{}', 'now')")
    for run_id, started in (("a", "00:00:00.002"), ("c", "00:00:00.001"), ("b", "00:00:00.002")):
        db.execute(
            "INSERT INTO runs (id, flow, version, digest, status, inputs, created, started) "
            "VALUES (?, 'f', 1, 'd', 'finished', '{}', ?, ?)",
            (run_id, f"2026-01-01T{started}Z", f"2026-01-01T{started}Z"),
        )
    db.commit()
    db.close()
    with backends.reading(path) as conn:
        assert conn is not None
        assert [run.id for run in store.list_runs(conn)] == [
            "b",
            "a",
            "c",
        ]  # newest first, then by id
        assert store.run_ids(conn) == ["b", "a", "c"]


def test_listing_does_not_import_langgraph(yard: Path, cli: Cli) -> None:
    cli(yard, "run", "calc", "--input", "n=1", "--run-id", "r1")
    probe = (
        "import sys\nfrom engine.cli import main\n"
        f"main(['runs', '--root', {str(yard)!r}])\nmain(['runs', 'show', 'r1', '--root', {str(yard)!r}])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('langgraph', 'langchain', 'openai'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_step_summary_counts_attempts_and_items() -> None:
    seq = Sequencer("r")
    events = [
        seq.make("step_started", "a"),
        seq.make("step_failed", "a", {"error": "boom", "duration_ms": 5}),
        seq.make("step_started", "a"),
        seq.make("step_finished", "a", {"duration_ms": 7}),
        seq.make("step_started", "m", {"index": 0}),
        seq.make("step_started", "m", {"index": 1}),
        seq.make("step_finished", "m", {"index": 1, "duration_ms": 1}),
        seq.make("step_started", "w"),
    ]
    summary = {s["step"]: s for s in step_summary(events, RunStatus.INTERRUPTED)}
    assert (summary["a"]["status"], summary["a"]["attempts"], summary["a"]["duration_ms"]) == (
        "finished",
        2,
        12.0,
    )
    assert (summary["m"]["status"], summary["m"]["attempts"]) == (
        "interrupted",
        2,
    )  # item 0 never ended
    assert summary["w"]["status"] == "interrupted"
    assert {s["step"]: s for s in step_summary(events, RunStatus.RUNNING)}["w"][
        "status"
    ] == "running"


@pytest.mark.sqlite_only("SQLite's query plan")
def test_listing_newest_first_reads_an_index_instead_of_sorting_every_run(yard: Path) -> None:
    with Yard.load(yard) as loaded:
        loaded.run("calc", {"n": 1})
    conn = store.open_existing(yard / ".blockyard" / "state.db")
    assert conn is not None
    try:
        plan = " / ".join(
            row[-1]
            for row in conn.execute(
                f"EXPLAIN QUERY PLAN SELECT id FROM runs ORDER BY {store.NEWEST_FIRST} LIMIT 50"
            )
        )
    finally:
        conn.close()
    # 10,000 runs: 0.5 ms with the index against 63 ms sorting them all (bench/bench_retention.py)
    assert "USING INDEX runs_newest" in plan and "TEMP B-TREE" not in plan, plan
