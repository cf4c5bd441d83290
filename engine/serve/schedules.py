"""Cron schedules of flows (`schedule: {cron, timezone, inputs, misfire}`), and crons created over the
LangGraph API (engine/state/crons.py), run while the server is up.

Fire times come from `engine.spec.cron` (croniter in the flow's time zone, with the grammar `validate`
checks). The last fire time of every flow is kept in the state database, so after downtime the
missed fire times are known: a fire time later than `MISFIRE_GRACE` is a misfire and follows the
flow's policy — `skip` drops it, `run_once` runs the flow once however many fire times were missed.
A fire time is recorded before its run starts (at most once: a crash in between loses that run
instead of doubling it), by a conditional UPDATE that only one of several servers sharing the
database wins (`ScheduleStore.claim`): each fire time fires once across replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.serve.catalog import Catalog, FlowEntry
from engine.serve.clock import Clock
from engine.serve.logs import fields, get_logger
from engine.spec.cron import latest_fire, next_fire, schedule_problem
from engine.spec.flow import ScheduleSpec
from engine.state import backends, crons
from engine.state.database import Connection
from engine.state.location import Location

MISFIRE_GRACE = timedelta(seconds=60)
HOUSEKEEPING = timedelta(seconds=15)  # how often approval timeouts are checked

Fire = Callable[[FlowEntry, datetime], Awaitable[str | None]]
FireCron = Callable[[crons.ApiCron, datetime], Awaitable[str | None]]
Expire = Callable[[datetime], Awaitable[int]]
# what one schedule of the catalog or the API is: its key in serve_schedules, its times, how it fires
Due = tuple[str, ScheduleSpec, Callable[[datetime], Awaitable[str | None]]]


def schedule_key(schedule: ScheduleSpec) -> str:
    """What a fire time depends on: a changed cron or zone starts the schedule afresh."""
    return f"{schedule.cron}|{schedule.timezone}"


@dataclass(frozen=True)
class ScheduleState:
    first_seen: datetime  # since when this schedule (this cron, this zone) has applied
    last_fire: datetime | None
    last_run: str | None
    key: str = ""

    @property
    def since(self) -> datetime:
        """Fire times after this one are still to be handled."""
        return (
            self.last_fire
            if self.last_fire and self.last_fire > self.first_seen
            else self.first_seen
        )


class ScheduleStore:
    """serve_schedules in the state database: when each flow was first scheduled and last fired."""

    def __init__(self, where: Path | Location) -> None:
        self.location = where if isinstance(where, Location) else Location(where)
        self.path = self.location.path

    def _connect(self) -> contextlib.AbstractContextManager[Connection]:
        # the table is migration 4's (engine/state/migrations.py), made on either backend before the block
        return backends.transaction(self.location)

    def load(self) -> dict[str, ScheduleState]:
        if self.location.url is None and not self.path.exists():
            return {}
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT flow, first_seen, last_fire, last_run, schedule FROM serve_schedules"
            )
            return {
                flow: ScheduleState(_parse(first), _parse(last) if last else None, run, key)
                for flow, first, last, run, key in rows.fetchall()
            }

    def seen(self, flow: str, when: datetime, key: str) -> None:
        """A schedule applies from `when` on (new, or its cron or zone changed)."""
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO serve_schedules (flow, schedule, first_seen) VALUES (?, ?, ?) "
                "ON CONFLICT(flow) DO UPDATE SET schedule = excluded.schedule, "
                "first_seen = excluded.first_seen",
                (flow, key, _format(when)),
            )

    def claim(self, flow: str, when: datetime) -> bool:
        """Record `when` as the flow's last fire time, unless it (or a later one) is recorded already:
        of several servers sharing the database (replicas), exactly one claims each fire time. A
        conditional UPDATE: on Postgres the second waits for the first's row lock, then finds the
        time taken; on SQLite the write lock serializes them."""
        with self._connect() as conn:
            cursor = conn.execute(
                "UPDATE serve_schedules SET last_fire = ? WHERE flow = ? "
                "AND (last_fire IS NULL OR last_fire < ?)",
                (_format(when), flow, _format(when)),
            )
            return bool(cursor.rowcount == 1)

    def fired(self, flow: str, when: datetime, run_id: str | None = None) -> None:
        with self._connect() as conn:
            conn.execute(
                "UPDATE serve_schedules SET last_fire = ?, last_run = COALESCE(?, last_run) WHERE flow = ?",
                (_format(when), run_id, flow),
            )

    def crons(self) -> list[crons.ApiCron]:
        """The crons created over the API (all of them: the scheduler skips disabled and ended ones)."""
        if self.location.url is None and not self.path.exists():
            return []
        with self._connect() as conn:
            return crons.search(conn)

    def forget(self, flow: str) -> None:
        """The flow is no longer scheduled: if it comes back, it starts afresh."""
        with self._connect() as conn:
            conn.execute("DELETE FROM serve_schedules WHERE flow = ?", (flow,))


def _format(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


class Scheduler:
    """Fires scheduled flows of the current catalog on time, and runs periodic housekeeping."""

    def __init__(
        self,
        store: ScheduleStore,
        clock: Clock,
        catalog: Callable[[], Catalog],
        fire: Fire,
        expire: Expire | None = None,
        fire_cron: FireCron | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.catalog = catalog
        self.fire = fire
        self.expire = expire
        self.fire_cron = fire_cron  # None: the API's crons are not this scheduler's
        self.crons: list[crons.ApiCron] = []  # as the last tick read them
        self.states: dict[str, ScheduleState] = {}
        self._changed = asyncio.Event()
        self._expiring: asyncio.Task[None] | None = None
        self.log = get_logger()

    def wake(self) -> None:
        """The catalog changed: recompute fire times now (safe to call from the event loop)."""
        self._changed.set()

    def next_fire(self, entry: FlowEntry) -> datetime | None:
        schedule = entry.bundle.flow.schedule
        return None if schedule is None else self._next(entry.name, schedule)

    async def run(self) -> None:
        """The scheduler loop; cancel the task to stop it."""
        try:
            await self._loop()
        finally:
            if self._expiring is not None:
                self._expiring.cancel()
                await asyncio.gather(self._expiring, return_exceptions=True)

    async def _loop(self) -> None:
        self.states = await asyncio.to_thread(self.store.load)
        while True:
            self._changed.clear()
            now = self.clock.now()
            await self.tick(now)
            await self._housekeeping(now)
            upcoming = [
                t for e in self.catalog().flows.values() if (t := self.next_fire(e)) is not None
            ]
            upcoming += [
                t
                for key, schedule, _fire in self._crons_due(now)
                if (t := self._next(key, schedule)) is not None
            ]
            wake_at = min([*upcoming, now + HOUSEKEEPING])
            sleeper = asyncio.ensure_future(self.clock.sleep_until(wake_at))
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                changed.cancel()

    def _next(self, key: str, schedule: ScheduleSpec) -> datetime | None:
        state = self.states.get(key)
        current = state is not None and state.key == schedule_key(schedule)
        return next_fire(schedule, state.since if state and current else self.clock.now())

    def _crons_due(self, now: datetime) -> list[Due]:
        """The API's crons that may fire (enabled, not past their end), as the last tick read them."""
        if self.fire_cron is None:
            return []
        fire_cron = self.fire_cron
        due: list[Due] = []
        for cron in self.crons:
            if not cron.enabled or (cron.end_time is not None and now > _parse(cron.end_time)):
                continue
            schedule = ScheduleSpec(cron=cron.cron, timezone=cron.timezone, misfire="skip")
            due.append((cron.key, schedule, functools.partial(fire_cron, cron)))
        return due

    async def tick(self, now: datetime) -> list[str]:
        """Fire what is due at `now`; returns the names of the flows fired (`cron:<id>` for the API's)."""
        if self.fire_cron is not None:  # made or changed on any server: read afresh
            self.crons = await asyncio.to_thread(self.store.crons)
        due: list[Due] = [
            (name, entry.bundle.flow.schedule, functools.partial(self.fire, entry))
            for name, entry in list(self.catalog().flows.items())
            if entry.bundle.flow.schedule is not None
        ]
        due += self._crons_due(now)
        scheduled = {key for key, _schedule, _fire in due}
        if self.fire_cron is None:  # the API's crons are another scheduler's to keep or forget
            scheduled |= {key for key in self.states if key.startswith(crons.KEY_PREFIX)}
        for name in [name for name in self.states if name not in scheduled]:
            await asyncio.to_thread(self.store.forget, name)
            del self.states[name]
        fired: list[str] = []
        for key, schedule, fire in due:
            if schedule_problem(schedule) is not None:
                continue
            when = await self._claim(key, schedule, now)
            if when is None:
                continue
            run_id = await fire(when)
            if run_id is not None:
                await self._record(key, when, run_id, self.states[key])
            fired.append(key)
        return fired

    async def _claim(self, key: str, schedule: ScheduleSpec, now: datetime) -> datetime | None:
        """The fire time of schedule `key` to fire now, claimed by this server; None when nothing is due,
        another server claimed it, or its misfire policy skips it."""
        state = self.states.get(key)
        if state is None or state.key != schedule_key(schedule):
            # nothing was missed by a schedule that just began
            await asyncio.to_thread(self.store.seen, key, now, schedule_key(schedule))
            self.states[key] = ScheduleState(
                now,
                state.last_fire if state else None,
                state.last_run if state else None,
                schedule_key(schedule),
            )
            return None
        upcoming = next_fire(schedule, state.since)
        latest = latest_fire(schedule, now) if upcoming is not None and upcoming <= now else None
        if latest is None:
            return None
        on_time = now - latest <= MISFIRE_GRACE
        if not on_time:
            event = (
                "schedule_misfire_skipped"
                if schedule.misfire == "skip"
                else "schedule_misfire_run_once"
            )
            self.log.info(
                event,
                extra=fields(
                    flow=key, last_missed=_format(latest), down_since=_format(state.since)
                ),
            )
        claimed = await asyncio.to_thread(self.store.claim, key, latest)
        self.states[key] = ScheduleState(state.first_seen, latest, state.last_run, state.key)
        if not claimed:  # another server sharing the database fired (or skipped) this time
            return None
        if not on_time and schedule.misfire == "skip":
            return None
        return latest

    async def _record(
        self, flow: str, when: datetime, run_id: str | None, state: ScheduleState
    ) -> None:
        await asyncio.to_thread(self.store.fired, flow, when, run_id)
        self.states[flow] = ScheduleState(
            state.first_seen, when, run_id or state.last_run, state.key
        )

    async def _housekeeping(self, now: datetime) -> None:
        # In a task of its own: expiring a gate goes on with its run, which must not hold up the
        # schedules; one round at a time.
        if self.expire is None or (self._expiring is not None and not self._expiring.done()):
            return
        self._expiring = asyncio.create_task(self._expire(now), name="blockyard-expire-approvals")

    async def _expire(self, now: datetime) -> None:
        assert self.expire is not None
        try:
            expired = await self.expire(now)
        except Exception:  # housekeeping must never stop the schedules
            self.log.exception("approval_expiry_failed")
            return
        if expired:
            self.log.info("approvals_expired", extra=fields(count=expired))
