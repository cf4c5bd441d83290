"""Schedules: cron arithmetic in time zones, firing on time, misfire policies after downtime.

Time is a ManualClock: the tests move it; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.serve.catalog import Catalog, FlowEntry, load_catalog
from engine.serve.clock import ManualClock
from engine.serve.schedules import Scheduler, ScheduleState, ScheduleStore
from engine.spec.cron import fire_times, latest_fire, next_fire, schedule_problem
from engine.spec.flow import ScheduleSpec
from engine.state.migrations import MIGRATIONS, SCHEMA_VERSION
from tests.serve.serve_helpers import YARD

DAILY_9 = (
    YARD["flows/add.yaml"]
    + "schedule: {cron: '0 9 * * *', timezone: Europe/Paris, inputs: {a: 5}, "
    "misfire: MISFIRE}\n"
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize(
    ("cron", "zone", "problem"),
    [
        ("0 9 * * *", "UTC", None),
        ("0 11 * * TUE", "Europe/Paris", None),
        ("*/5 * * * *", "America/New_York", None),
        ("@daily", "Europe/Paris", None),
        (
            "0 9 * * * *",
            "UTC",
            "cron '0 9 * * * *' has 6 fields; use five (minute hour day-of-month month day-of-week, "
            "e.g. '0 11 * * TUE') or a macro such as @daily (a sixth field would be seconds: schedules "
            "fire at most once a minute)",
        ),
        (
            "61 * * * *",
            "UTC",
            "cron '61 * * * *': minute '61' is not valid: out of range; the minute takes 0-59, and "
            "ranges, steps and lists of them (1-5, */15, 1,15)",
        ),
        (
            "0 0 30 2 *",
            "UTC",
            "cron '0 0 30 2 *' never fires: no date in the next 50 years matches it (is the day of "
            "month one the month has?)",
        ),
        (
            "0 9 * * *",
            "Europe/Pariss",
            "unknown time zone 'Europe/Pariss' (use an IANA name such as Europe/Paris, "
            "America/New_York or UTC)",
        ),
    ],
)
def test_schedule_problems(cron: str, zone: str, problem: str | None) -> None:
    assert schedule_problem(ScheduleSpec(cron=cron, timezone=zone)) == problem


def test_fire_times_follow_the_time_zone_across_daylight_saving() -> None:
    schedule = ScheduleSpec(cron="0 9 * * *", timezone="Europe/Paris")
    times = fire_times(schedule, at("2026-03-27T12:00:00+00:00"))
    # 09:00 Paris is 08:00 UTC in winter and 07:00 UTC from 29 March
    assert [next(times) for _ in range(3)] == [
        at("2026-03-28T08:00:00+00:00"),
        at("2026-03-29T07:00:00+00:00"),
        at("2026-03-30T07:00:00+00:00"),
    ]
    assert next_fire(schedule, at("2026-03-28T08:00:00+00:00")) == at("2026-03-29T07:00:00+00:00")
    assert latest_fire(schedule, at("2026-03-29T07:00:00+00:00")) == at("2026-03-29T07:00:00+00:00")
    assert latest_fire(schedule, at("2026-03-29T06:59:00+00:00")) == at("2026-03-28T08:00:00+00:00")
    assert next_fire(ScheduleSpec(cron="bad"), at("2026-03-28T08:00:00+00:00")) is None


class Fires:
    """The scheduler's fire callback: records what fired and wakes waiting tests."""

    def __init__(self) -> None:
        self.fired: list[tuple[str, datetime, dict[str, object]]] = []
        self.event = asyncio.Event()

    async def __call__(self, entry: FlowEntry, when: datetime) -> str:
        schedule = entry.bundle.flow.schedule
        assert schedule is not None
        self.fired.append((entry.name, when, dict(schedule.inputs)))
        self.event.set()
        return f"run-{len(self.fired)}"


def scheduled_yard(
    make_yard: Callable[[dict[str, str]], Path], misfire: str
) -> tuple[Path, Catalog]:
    root = make_yard({**YARD, "flows/add.yaml": DAILY_9.replace("MISFIRE", misfire)})
    catalog = load_catalog(root)
    assert catalog.ok, catalog.diagnostics
    return root, catalog


def scheduler_for(root: Path, catalog: Catalog, clock: ManualClock, fires: Fires) -> Scheduler:
    scheduler = Scheduler(
        ScheduleStore(root / ".blockyard/state.db"), clock, lambda: catalog, fires
    )
    scheduler.states = ScheduleStore(root / ".blockyard/state.db").load()
    return scheduler


def test_a_schedule_fires_on_time_and_remembers_it(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    async def body() -> None:
        root, catalog = scheduled_yard(make_yard, "skip")
        clock = ManualClock(at("2026-05-04T06:00:00+00:00"))
        fires = Fires()
        scheduler = scheduler_for(root, catalog, clock, fires)
        assert await scheduler.tick(clock.now()) == []  # first sight: nothing was missed
        assert scheduler.next_fire(catalog.flows["add"]) == at("2026-05-04T07:00:00+00:00")
        assert await scheduler.tick(at("2026-05-04T06:59:59+00:00")) == []
        assert await scheduler.tick(at("2026-05-04T07:00:00.200+00:00")) == ["add"]
        assert fires.fired == [("add", at("2026-05-04T07:00:00+00:00"), {"a": 5})]
        assert await scheduler.tick(at("2026-05-04T07:00:30+00:00")) == []  # once per fire time
        stored = ScheduleStore(root / ".blockyard/state.db").load()["add"]
        assert stored.last_fire == at("2026-05-04T07:00:00+00:00")
        assert stored.last_run == "run-1"
        assert scheduler.next_fire(catalog.flows["add"]) == at("2026-05-05T07:00:00+00:00")

    asyncio.run(body())


@pytest.mark.parametrize(("misfire", "expected"), [("skip", []), ("run_once", ["add"])])
def test_misfires_after_downtime_follow_the_policy(
    make_yard: Callable[[dict[str, str]], Path], misfire: str, expected: list[str]
) -> None:
    async def body() -> None:
        root, catalog = scheduled_yard(make_yard, misfire)
        fires = Fires()
        before = scheduler_for(root, catalog, ManualClock(at("2026-05-04T06:00:00+00:00")), fires)
        await before.tick(at("2026-05-04T06:00:00+00:00"))
        # the server was down for three days: three fire times missed
        clock = ManualClock(at("2026-05-07T10:00:00+00:00"))
        after = scheduler_for(root, catalog, clock, fires)
        assert await after.tick(clock.now()) == expected
        assert [when for _, when, _ in fires.fired] == (
            [at("2026-05-07T07:00:00+00:00")] if expected else []
        )
        stored = ScheduleStore(root / ".blockyard/state.db").load()["add"]
        # the missed ones are settled either way
        assert stored.last_fire == at("2026-05-07T07:00:00+00:00")
        assert await after.tick(clock.now()) == []
        assert after.next_fire(catalog.flows["add"]) == at("2026-05-08T07:00:00+00:00")

    asyncio.run(body())


def test_a_fire_time_just_passed_at_restart_is_not_a_misfire(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    async def body() -> None:
        root, catalog = scheduled_yard(make_yard, "skip")
        fires = Fires()
        await scheduler_for(
            root, catalog, ManualClock(at("2026-05-04T06:00:00+00:00")), fires
        ).tick(at("2026-05-04T06:00:00+00:00"))
        restarted = scheduler_for(
            root, catalog, ManualClock(at("2026-05-04T07:00:20+00:00")), fires
        )
        assert await restarted.tick(at("2026-05-04T07:00:20+00:00")) == ["add"]

    asyncio.run(body())


def test_the_scheduler_loop_fires_when_the_clock_reaches_the_fire_time(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    async def body() -> None:
        root, catalog = scheduled_yard(make_yard, "skip")
        clock = ManualClock(at("2026-05-04T06:58:00+00:00"))
        fires = Fires()
        scheduler = Scheduler(
            ScheduleStore(root / ".blockyard/state.db"), clock, lambda: catalog, fires
        )
        task = asyncio.create_task(scheduler.run())
        try:
            while "add" not in scheduler.states:  # the loop has seen the flow
                await asyncio.sleep(0)
            clock.set(at("2026-05-04T06:59:00+00:00"))
            await asyncio.sleep(0.05)
            assert fires.fired == []
            clock.set(at("2026-05-04T07:00:00+00:00"))
            await asyncio.wait_for(fires.event.wait(), timeout=10)
            assert fires.fired[0][:2] == ("add", at("2026-05-04T07:00:00+00:00"))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(body())


def test_housekeeping_calls_the_approval_expiry_hook(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    async def body() -> None:
        root, catalog = scheduled_yard(make_yard, "skip")
        clock = ManualClock(at("2026-05-04T06:00:00+00:00"))
        seen: list[datetime] = []
        called = asyncio.Event()

        async def expire(now: datetime) -> int:
            seen.append(now)
            called.set()
            return 0

        scheduler = Scheduler(
            ScheduleStore(root / ".blockyard/state.db"), clock, lambda: catalog, Fires(), expire
        )
        task = asyncio.create_task(scheduler.run())
        try:
            await asyncio.wait_for(called.wait(), timeout=10)
            called.clear()
            clock.set(clock.now() + timedelta(seconds=15))
            await asyncio.wait_for(called.wait(), timeout=10)
            assert seen == [at("2026-05-04T06:00:00+00:00"), at("2026-05-04T06:00:15+00:00")]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(body())


def test_a_changed_cron_starts_afresh_and_a_removed_schedule_is_forgotten(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    async def body() -> None:
        root, catalog = scheduled_yard(make_yard, "run_once")
        fires = Fires()
        clock = ManualClock(at("2026-05-04T06:00:00+00:00"))
        scheduler = scheduler_for(root, catalog, clock, fires)
        await scheduler.tick(clock.now())
        assert await scheduler.tick(at("2026-05-04T07:00:05+00:00")) == ["add"]
        # at noon the cron moves to 08:00 Paris (06:00 UTC): today's 06:00 was not missed
        (root / "flows/add.yaml").write_text(
            DAILY_9.replace("MISFIRE", "run_once").replace("'0 9", "'0 8")
        )
        moved = load_catalog(root, catalog)
        scheduler.catalog = lambda: moved
        assert await scheduler.tick(at("2026-05-04T12:00:00+00:00")) == []
        assert scheduler.next_fire(moved.flows["add"]) == at("2026-05-05T06:00:00+00:00")
        stored = ScheduleStore(root / ".blockyard/state.db").load()["add"]
        assert (stored.first_seen, stored.last_fire) == (
            at("2026-05-04T12:00:00+00:00"),
            at("2026-05-04T07:00:00+00:00"),
        )
        # the schedule is removed, then comes back a week later: nothing was missed meanwhile
        (root / "flows/add.yaml").write_text(YARD["flows/add.yaml"])
        unscheduled = load_catalog(root, moved)
        scheduler.catalog = lambda: unscheduled
        await scheduler.tick(at("2026-05-04T13:00:00+00:00"))
        assert "add" not in ScheduleStore(root / ".blockyard/state.db").load()
        (root / "flows/add.yaml").write_text(DAILY_9.replace("MISFIRE", "run_once"))
        back = load_catalog(root, unscheduled)
        scheduler.catalog = lambda: back
        assert await scheduler.tick(at("2026-05-11T13:00:00+00:00")) == []
        assert len(fires.fired) == 1

    asyncio.run(body())


def _file_of_an_older_blockyard(path: Path, version: int, schedules_table: bool) -> None:
    """A state file migrated up to `version` (before migration 4 made serve_schedules), with the table the
    scheduler of those releases created itself when `schedules_table`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "CREATE TABLE blockyard_migrations (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)"
        )
        for number, statements in MIGRATIONS[:version]:
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO blockyard_migrations VALUES (?, '2026-01-01T00:00:00Z')", (number,)
            )
        if schedules_table:
            conn.execute(
                "CREATE TABLE serve_schedules (flow TEXT PRIMARY KEY, schedule TEXT NOT NULL, "
                "first_seen TEXT NOT NULL, last_fire TEXT, last_run TEXT)"
            )
            conn.execute(
                "INSERT INTO serve_schedules VALUES ('add', '0 9 * * *|UTC', '2026-05-01T00:00:00+00:00', "
                "'2026-05-03T09:00:00+00:00', 'r1')"
            )
        conn.commit()


@pytest.mark.parametrize(
    "schedules_table", [False, True], ids=["without-the-table", "with-its-own-table"]
)
def test_a_state_file_from_before_the_schedules_migration_is_migrated_and_kept(
    tmp_path: Path, schedules_table: bool
) -> None:
    """The schedules' table has one definition, migration 4 (engine/state/migrations.py): the store brings an
    older file up to date instead of creating the table itself, and keeps what such a file's scheduler stored."""
    path = tmp_path / ".blockyard" / "state.db"
    _file_of_an_older_blockyard(path, 3, schedules_table)
    store = ScheduleStore(path)
    loaded = store.load()
    if schedules_table:
        assert loaded == {
            "add": ScheduleState(
                at("2026-05-01T00:00:00+00:00"),
                at("2026-05-03T09:00:00+00:00"),
                "r1",
                "0 9 * * *|UTC",
            )
        }
    else:
        assert loaded == {}
    store.seen("hello", at("2026-05-04T06:00:00+00:00"), "@daily|UTC")
    assert store.claim("hello", at("2026-05-05T00:00:00+00:00"))
    assert not store.claim("hello", at("2026-05-05T00:00:00+00:00"))  # each fire time once
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert (
            conn.execute("SELECT MAX(version) FROM blockyard_migrations").fetchone()[0]
            == SCHEMA_VERSION
        )
    assert set(store.load()) == ({"add", "hello"} if schedules_table else {"hello"})
