"""The server's daily gc (engine/serve/chores.py, docs/serve.md): once a day across replicas, what
`retention:` no longer keeps is deleted. Time is a ManualClock moved by hand."""

from __future__ import annotations

import asyncio
import textwrap
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine import Yard
from engine.serve import chores
from engine.serve.clock import ManualClock
from engine.spec.config import RetentionSpec
from engine.state.location import locate
from tests.runtime.conftest import BLOCKS, CONFIG, FLOWS
from tests.support.state import state_db, state_file

LONG_AGO = "2020-01-01T00:00:00.000Z"


def _yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(
        {
            **BLOCKS,
            **FLOWS,
            **CONFIG,
            "blockyard.yaml": textwrap.dedent(CONFIG["blockyard.yaml"])
            + "retention: {runs: 30d}\n",
        }
    )


def _aged_run(root: Path) -> str:
    with Yard.load(root) as yard:
        run_id = yard.run("calc", {"n": 1}).run_id
    with state_db(root) as conn:
        conn.execute(
            "UPDATE runs SET created = ?, started = ?, finished = ? WHERE id = ?",
            (LONG_AGO, LONG_AGO, LONG_AGO, run_id),
        )
    return run_id


def _exists(root: Path, run_id: str) -> bool:
    with state_db(root) as conn:
        return conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None


async def _until(check: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the daily gc did not collect in time"
        await asyncio.sleep(0.02)


def test_one_replica_claims_the_gc_per_day(make_yard: Callable[[dict[str, str]], Path]) -> None:
    root = _yard(make_yard)
    _aged_run(root)  # the database exists, migrated
    location = locate(state_file(root))
    now = datetime(2030, 5, 1, 3, 0, tzinfo=UTC)
    assert chores.claim(location, chores.GC, now, chores.GC_EVERY) is True
    # another replica
    assert chores.claim(location, chores.GC, now + timedelta(minutes=10), chores.GC_EVERY) is False
    assert chores.claim(location, chores.GC, now + timedelta(hours=23), chores.GC_EVERY) is False
    assert chores.claim(location, chores.GC, now + timedelta(days=1), chores.GC_EVERY) is True


def test_the_server_collects_daily(make_yard: Callable[[dict[str, str]], Path]) -> None:
    root = _yard(make_yard)
    first = _aged_run(root)
    location = locate(state_file(root))
    start = datetime.now(UTC)
    clock = ManualClock(start)
    spec = RetentionSpec(runs="30d")

    async def scenario() -> None:
        task = asyncio.create_task(chores.daily_gc(location, lambda: spec, clock))
        try:
            await _until(lambda: not _exists(root, first))
            second = await asyncio.to_thread(_aged_run, root)
            clock.set(start + timedelta(days=1, minutes=1))  # the next day's look collects it
            await _until(lambda: not _exists(root, second))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
