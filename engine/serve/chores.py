"""Chores the server does once a period across all its replicas: the daily gc (`retention:` of
blockyard.yaml; engine/state/retention.py, docs/serve.md).

Each chore has a row in `serve_chores` with when it was last done. A replica does it only after
moving that time forward with a conditional UPDATE, which exactly one of several servers sharing
the database wins (on Postgres the others wait for its row lock and then find the time taken; on
SQLite the write lock serializes them) — as schedules fire once (engine/serve/schedules.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from engine.serve.clock import Clock
from engine.serve.logs import fields, get_logger
from engine.spec.config import RetentionSpec
from engine.state import backends, retention
from engine.state.location import Location

GC = "gc"
GC_EVERY = timedelta(days=1)
LOOK_EVERY = timedelta(minutes=10)  # how often a replica looks whether the day is over
_NEVER = "0000-00-00T00:00:00Z"


def _format(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def claim(location: Location, chore: str, now: datetime, every: timedelta) -> bool:
    """Record `now` as when `chore` was last done, unless that was within `every`: True for the one
    replica that should do it now."""
    with backends.transaction(location) as conn:
        conn.execute(
            "INSERT OR IGNORE INTO serve_chores (name, last_done) VALUES (?, ?)", (chore, _NEVER)
        )
        cursor = conn.execute(
            "UPDATE serve_chores SET last_done = ? WHERE name = ? AND last_done <= ?",
            (_format(now), chore, _format(now - every)),
        )
        return bool(cursor.rowcount == 1)


async def daily_gc(location: Location, policy: Callable[[], RetentionSpec], clock: Clock) -> None:
    """Collect once a day (across replicas) what the current `retention:` no longer keeps; cancel the
    task to stop. The file is not rewritten (no VACUUM: it would hold up every run): new rows reuse
    the freed pages, and `blockyard gc` gives them back to the file system."""
    log = get_logger()
    while True:
        now = clock.now()
        chosen = retention.Policy.of(policy())
        try:
            if not chosen.empty and await asyncio.to_thread(claim, location, GC, now, GC_EVERY):
                report = await asyncio.to_thread(
                    retention.collect, location, chosen, now, vacuum=False
                )
                log.info("gc_done", extra=fields(**report.counts, bytes=report.bytes_after))
        except Exception:  # housekeeping must never stop the server; the next look tries again
            log.exception("gc_failed")
        await clock.sleep_until(now + LOOK_EVERY)
