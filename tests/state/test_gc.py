"""`blockyard gc` and `retention:` (docs/runtime.md, "Retention"; docs/cli.md): ended runs past their
age go with their trace, checkpoints and gates; runs waiting for an approval, running runs and the
turns of conversation threads never do. Runs are aged by moving their times back in the database."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine import Yard
from engine.core.events import RunStatus
from tests.runtime.conftest import BLOCKS, CONFIG, FLOWS
from tests.support.cli import Cli
from tests.support.state import state_db, state_file

LONG_AGO = "2020-01-01T00:00:00.000Z"


def _yard(make_yard: Callable[[dict[str, str]], Path], retention: str = "") -> Path:
    config = textwrap.dedent(CONFIG["blockyard.yaml"]) + (
        f"retention: {retention}\n" if retention else ""
    )
    return make_yard({**BLOCKS, **FLOWS, **CONFIG, "blockyard.yaml": config})


def _age(root: Path, *run_ids: str) -> None:
    with state_db(root) as conn:
        for run_id in run_ids:
            conn.execute(
                "UPDATE runs SET created = ?, started = ?, finished = CASE WHEN finished IS NULL THEN NULL "
                "ELSE ? END WHERE id = ?",
                (LONG_AGO, LONG_AGO, LONG_AGO, run_id),
            )


def _count(root: Path, table: str, column: str, run_id: str) -> int:
    with state_db(root) as conn:
        return int(
            conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (run_id,)).fetchone()[
                0
            ]
        )


def _exists(root: Path, run_id: str) -> bool:
    return _count(root, "runs", "id", run_id) == 1


def _runs(root: Path) -> dict[str, str]:
    """One run of each kind, all aged: finished, failed, waiting at a gate, a thread's turn; and a
    finished one that is new."""
    with Yard.load(root) as yard:
        made = {
            # `exit`: LangGraph's loop, whose last checkpoint a finished run keeps (a `sync` run of
            # calc keeps none: engine/runtime/direct_runs.py)
            "finished": yard.run("calc", {"n": 1}, durability="exit").run_id,
            "failed": yard.run("fragile").run_id,
            "waiting": yard.run("gated", {"n": 1}).run_id,
            "turn": yard.run("calc", {"n": 2}, thread="chat-1").run_id,
        }
        new = yard.run("calc", {"n": 3}).run_id
    _age(root, *made.values())
    return {**made, "new": new}


def test_gc_deletes_old_finished_runs_with_their_trace_and_checkpoint_and_keeps_the_rest(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = _yard(make_yard, "{runs: 30d}")
    runs = _runs(root)
    old = runs["finished"]
    assert (
        _count(root, "checkpoints", "thread_id", old) == 1
        and _count(root, "events", "run_id", old) > 0
    )

    dry = cli(root, "gc", "--dry-run")
    assert dry.code == 0, dry.err
    assert "would delete 1 run(s)" in dry.out and "0 gates" in dry.out
    assert _exists(root, old)  # a dry run deletes nothing

    done = cli(root, "gc", "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["counts"]["runs"] == 1 and report["counts"]["checkpoints"] == 1
    assert report["counts"]["events"] > 0
    assert not _exists(root, old)
    assert (
        _count(root, "events", "run_id", old) == 0
        and _count(root, "checkpoints", "thread_id", old) == 0
    )
    for kept in (
        "failed",
        "waiting",
        "turn",
        "new",
    ):  # no `failed:` age; waiting and turns are never deleted
        assert _exists(root, runs[kept]), kept
    listed = cli(root, "runs")
    assert old not in listed.out and runs["new"] in listed.out


def test_gc_deletes_old_failed_runs_only_with_a_failed_age_and_never_a_waiting_run(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = _yard(make_yard, "{failed: 7d}")
    runs = _runs(root)
    assert _count(root, "gates", "run_id", runs["waiting"]) == 1
    # `stamp` finished inside the node that `boom` failed in: its row is what a resume goes on after
    assert _count(root, "inline_steps", "thread_id", runs["failed"]) == 1
    assert cli(root, "gc").code == 0
    assert not _exists(root, runs["failed"])
    assert _count(root, "inline_steps", "thread_id", runs["failed"]) == 0
    assert _exists(root, runs["finished"])  # no `runs:` age: finished runs stay
    assert _exists(root, runs["waiting"]) and _count(root, "gates", "run_id", runs["waiting"]) == 1
    with Yard.load(root) as yard:  # still decidable
        assert yard.resume(runs["waiting"], approve=True).status == RunStatus.FINISHED


def test_gc_traces_keeps_the_row_and_drops_trace_and_checkpoint(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = _yard(make_yard, "{traces: 7d, runs: 365d}")
    runs = _runs(root)
    old = runs["finished"]
    _age_to(root, old, _days_ago(30))  # past traces (7d), within runs (365d)
    assert cli(root, "gc").code == 0
    assert _exists(root, old)
    assert (
        _count(root, "events", "run_id", old) == 0
        and _count(root, "checkpoints", "thread_id", old) == 0
    )
    shown = cli(root, "runs", "show", old)
    assert shown.code == 0 and "finished" in shown.out
    assert _count(root, "events", "run_id", runs["new"]) > 0


def test_gc_max_runs_keeps_the_newest_finished_runs(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = _yard(make_yard, "{max_runs: 2}")
    with Yard.load(root) as yard:
        ids = [yard.run("calc", {"n": n}).run_id for n in range(4)]
    assert cli(root, "gc").code == 0
    assert [_exists(root, run_id) for run_id in ids] == [False, False, True, True]


def test_gc_older_than_overrides_and_bad_values_are_usage_errors(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = _yard(make_yard)
    runs = _runs(root)
    nothing = cli(root, "gc")
    assert nothing.code == 0 and "sets no `retention:`" in nothing.err
    assert _exists(root, runs["finished"])
    assert cli(root, "gc", "--older-than", "30d").code == 0
    assert not _exists(root, runs["finished"]) and _exists(root, runs["new"])
    bad = cli(root, "gc", "--older-than", "soon")
    assert bad.code == 2 and bad.err.startswith("error: gc: --older-than 'soon' is not a duration")


def test_gc_refuses_a_retention_that_does_not_validate(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = _yard(make_yard, "{runs: 30m}")
    refused = cli(root, "gc")
    assert refused.code == 1 and "BY865" in refused.err


@pytest.mark.sqlite_only("the file's size after VACUUM")
def test_gc_gives_the_space_back_to_the_file_system(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = _yard(make_yard, "{runs: 1d}")
    with Yard.load(root) as yard:
        ids = [yard.run("calc", {"n": n}).run_id for n in range(30)]
    _age(root, *ids)
    done = json.loads(cli(root, "gc", "--json").out)
    assert done["counts"]["runs"] == 30 and done["vacuumed"] is True
    assert done["bytes_after"] < done["bytes_before"]
    assert state_file(root).stat().st_size == done["bytes_after"]


def _days_ago(days: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _age_to(root: Path, run_id: str, when: str) -> None:
    with state_db(root) as conn:
        conn.execute(
            "UPDATE runs SET created = ?, started = ?, finished = ? WHERE id = ?",
            (when, when, when, run_id),
        )
