"""Bounded state (issue 15, target 4): what the state database holds per finished run, what `gc`
gives back, and how fast `blockyard runs` lists with many runs.

1. chain50 (50 steps, bench/bench_overhead.py): RUNS_CHAIN finished runs; bytes per run, counted as
   SQLite pages in use (page_count - freelist_count, times page_size) after a WAL checkpoint, over
   the empty database's pages — the same as the file's size after a VACUUM.
2. BENCH_MANY (10,000) short runs of `calc` (2 steps): database size; `store.list_runs` (what
   `blockyard runs` calls, newest 50) timed in-process, median of 21; then `gc --older-than` on all of
   them: size after (pages in use and the file after VACUUM) and how long the collection took.

    python bench/bench_retention.py           # BENCH_MANY=10000 RUNS_CHAIN=50 by default
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import header, make_yard, table
from bench_overhead import BLOCKS, flows

from engine import Yard
from engine.spec.config import RetentionSpec
from engine.state import retention, store
from engine.state.location import Location

MANY = int(os.environ.get("BENCH_MANY", 10_000))
CHAIN_RUNS = int(os.environ.get("RUNS_CHAIN", 50))
CALC = """
flow: calc
inputs: {n: {type: integer}}
outputs: [n]
steps:
  - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}}
  - {id: b, uses: inc}
"""


def used_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, free, size = (
            conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("page_count", "freelist_count", "page_size")
        )
        return int((pages - free) * size)
    finally:
        conn.close()


async def many(yard: Yard, count: int, flow: str, inputs: dict[str, int]) -> float:
    began = time.perf_counter()
    batch = 50
    for start in range(0, count, batch):
        results = await asyncio.gather(
            *(yard.arun(flow, inputs) for _ in range(min(batch, count - start)))
        )
        assert all(r.ok for r in results)
    return time.perf_counter() - began


def listing_ms(path: Path) -> float:
    conn = store.open_existing(path)
    assert conn is not None
    try:
        samples = []
        for _ in range(21):
            began = time.perf_counter()
            rows = store.list_runs(conn, limit=50)
            samples.append((time.perf_counter() - began) * 1000)
            assert len(rows) == 50
        plan = " / ".join(
            row[-1]
            for row in conn.execute(
                f"EXPLAIN QUERY PLAN SELECT id FROM runs ORDER BY {store.NEWEST_FIRST} LIMIT 50"
            )
        )
        print(f"listing plan: {plan}")
        return statistics.median(samples)
    finally:
        conn.close()


async def main() -> None:
    header("Bounded state: bytes per finished run, gc, listing 10,000 runs")
    files = {**BLOCKS, **flows(), "flows/calc.yaml": CALC, "blockyard.yaml": "{}\n"}
    root = make_yard(files)
    db = root / ".blockyard" / "state.db"
    async with Yard.load(root) as yard:
        await yard.arun("calc", {"n": 0})  # the tables exist, the definition is stored
        empty = used_bytes(db)
        await many(yard, CHAIN_RUNS, "chain50", {"n": 0})
        chain = used_bytes(db)
        per_chain = (chain - empty) / CHAIN_RUNS
        took = await many(yard, MANY, "calc", {"n": 0})
        full = used_bytes(db)
    listed = listing_ms(db)
    # the same runs without migration 7's index: as before it
    bare = db.with_name("without-index.db")
    shutil.copyfile(db, bare)
    with sqlite3.connect(bare) as conn:
        conn.execute("DROP INDEX runs_newest")
    unindexed = listing_ms(bare)
    runs = MANY + CHAIN_RUNS + 1
    before_file = db.stat().st_size
    began = time.perf_counter()
    report = retention.collect(
        Location(db),
        retention.Policy.of(RetentionSpec(), "1h"),
        datetime.now().astimezone().replace(year=datetime.now().year + 1),
        vacuum=True,
    )
    collected = time.perf_counter() - began
    print(
        table(
            ["what", "figure"],
            [
                [
                    "chain50: stored per finished run (pages in use)",
                    f"{per_chain / 1000:.1f} KB ({CHAIN_RUNS} runs)",
                ],
                [f"{MANY} short runs: time to run them (50 at a time)", f"{took:.1f} s"],
                [
                    f"database with {runs} runs (pages in use)",
                    f"{full / 2**20:.1f} MiB ({full / runs / 1000:.1f} KB/run)",
                ],
                ["database file before gc (with free pages)", f"{before_file / 2**20:.1f} MiB"],
                [f"`runs` listing (store.list_runs, newest 50 of {runs})", f"{listed:.2f} ms"],
                ["the same without the runs_newest index (before)", f"{unindexed:.2f} ms"],
                [
                    "gc of every run (delete + VACUUM)",
                    f"{collected:.1f} s; deleted {report.counts['runs']} runs, "
                    f"{report.counts['events']} events",
                ],
                ["database file after gc", f"{db.stat().st_size / 2**20:.2f} MiB"],
            ],
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
