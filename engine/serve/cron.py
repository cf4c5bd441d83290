"""Cron arithmetic for flow schedules: croniter in the schedule's IANA time zone, results in UTC."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from engine.spec.flow import ScheduleSpec


def schedule_problem(schedule: ScheduleSpec) -> str | None:
    """Why a schedule can't run, or None. Five cron fields exactly, and a known IANA zone."""
    if len(schedule.cron.split()) != 5:
        return f"cron '{schedule.cron}' must have exactly five fields (minute hour day month weekday)"
    if not croniter.is_valid(schedule.cron):
        return f"cron '{schedule.cron}' is not a valid cron expression"
    try:
        ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone '{schedule.timezone}' (use an IANA name such as Europe/Paris)"
    return None


def fire_times(schedule: ScheduleSpec, after: datetime) -> Iterator[datetime]:
    """Fire times strictly after `after`, in UTC, computed in the schedule's time zone."""
    start = after.astimezone(ZoneInfo(schedule.timezone))
    cron = croniter(schedule.cron, start)
    while True:
        yield cron.get_next(datetime).astimezone(UTC)


def latest_fire(schedule: ScheduleSpec, now: datetime) -> datetime:
    """The last fire time at or before `now` (cheap however long the server was down)."""
    probe = now.astimezone(ZoneInfo(schedule.timezone)) + timedelta(microseconds=1)
    return croniter(schedule.cron, probe).get_prev(datetime).astimezone(UTC)


def next_fire(schedule: ScheduleSpec, after: datetime) -> datetime | None:
    if schedule_problem(schedule) is not None:
        return None
    return next(fire_times(schedule, after))
