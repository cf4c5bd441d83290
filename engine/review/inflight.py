"""What a change means for what exists now (`blockyard diff --state`): paused runs, schedules, threads.

A paused run keeps the definition it started with (its bundle is pinned in the state database by
digest, docs/runtime.md), so a change never moves a run under way: it is compared with the head
to say what the change *would* do to it. A run whose gate or step the head removes cannot finish
on the head, so if its pinned definition were pruned it could not go on. Schedules are compared
by their next fire time from now; threads by whether their flow changed (their next turn runs the
head's version).

What exists now is read from a `StateSource`: the local state database (`LocalState`, here), or a
running server over HTTP (engine/cli/serverstate.py: the HTTP client stays out of this package).
Both give the same `Listing`, judged the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from engine.core.events import RunStatus
from engine.core.values import JsonDict
from engine.definitions.project import Project
from engine.review.changes import (
    REMOVED,
    InFlight,
    PausedRun,
    ScheduleChange,
    ThreadChange,
    YardDiff,
    field_changes,
)
from engine.review.compare import step_data
from engine.spec import FlowSpec, ScheduleSpec, StepSpec
from engine.spec.cron import next_fire
from engine.spec.walk import walk_steps
from engine.state import backends, gates, store, threads
from engine.state.location import Location

ALTERED = "altered"
MAX_LISTED = 1000  # paused runs and threads looked at


@dataclass
class PausedListing:
    """A paused run as its source lists it: the flow document it is pinned to, the steps it waits at."""

    run_id: str
    flow: str
    version: int
    definition: JsonDict | None  # the pinned flow document; None when it is gone
    waiting: list[str]


@dataclass
class ServedSchedule:
    """A schedule a server fires now: its cron and timezone, and its next fire time as the server says."""

    cron: str
    timezone: str
    next_fire: str | None


@dataclass
class Listing:
    """What exists now for the flows a change touches."""

    source: str
    runs: list[PausedListing] = field(default_factory=list)
    threads: list[tuple[str, str]] = field(default_factory=list)  # (thread id, flow)
    # a server's schedules by flow (every flow it serves with one); None: the base side's schedules stand
    # for what fires now (the local state database keeps no schedules of its own)
    served: dict[str, ServedSchedule] | None = None


class StateSource(Protocol):
    """Where the runs, schedules and threads that exist now are read."""

    def listing(self, flows: set[str]) -> Listing:
        """The paused runs and threads of `flows` (and, for a server, its schedules)."""
        ...


class LocalState:
    """The yard's state database (`paths.state`, or Postgres), read as `blockyard runs` reads it."""

    def __init__(self, where: Location) -> None:
        self.where = where

    def listing(self, flows: set[str]) -> Listing:
        found = Listing(self.where.shown)
        with backends.reading(self.where) as conn:
            if conn is None:
                return found
            for run in store.list_runs(conn, statuses=[RunStatus.WAITING], limit=MAX_LISTED):
                if run.flow not in flows:
                    continue
                pinned = store.load_definition(conn, run.digest)
                waiting = [
                    gate.step
                    for gate in gates.of_run(conn, run.id)
                    if gate.status == gates.GateStatus.WAITING
                ]
                definition = json.loads(pinned)["flow"] if pinned is not None else None
                found.runs.append(PausedListing(run.id, run.flow, run.version, definition, waiting))
            for flow in sorted(flows):
                found.threads += [
                    (thread.id, flow)
                    for thread in threads.list_threads(conn, flow=flow, limit=MAX_LISTED)
                ]
        return found


def touched_flows(diff: YardDiff) -> set[str]:
    """The flows a change adds, removes, renames, changes or affects, under their names on both sides."""
    return {f.name for f in diff.flows} | {f.old_name for f in diff.flows if f.old_name}


def in_flight(
    diff: YardDiff, base: Project, head: Project, source: StateSource, now: datetime | None = None
) -> InFlight:
    """The impact of the change on what `source` lists now."""
    moment = now or datetime.now(UTC)
    touched = touched_flows(diff)
    listing = source.listing(touched)
    found = InFlight(listing.source)
    found.schedules = (
        schedule_changes(base, head, moment)
        if listing.served is None
        else served_schedule_changes(listing.served, head, touched, moment)
    )
    for run in listing.runs:
        if run.flow in touched:
            found.runs += paused(
                run.run_id, run.flow, run.version, run.definition, run.waiting, head
            )
    for thread_id, flow in listing.threads:
        if flow not in touched:
            continue
        change = diff.flow(flow)
        what = "removed" if change is not None and change.status == REMOVED else "changed"
        found.threads.append(
            ThreadChange(
                thread_id,
                flow,
                (
                    f"its flow {what}: the next turn runs the head's version"
                    if what == "changed"
                    else "its flow is removed: the thread cannot take another turn"
                ),
            )
        )
    return found


def paused(
    run_id: str,
    flow: str,
    version: int,
    pinned: JsonDict | None,
    waiting: list[str],
    head: Project,
) -> list[PausedRun]:
    """One line per step a paused run waits at, if the head removes or alters it."""
    keeps = f"it keeps running on its pinned version (v{version})"
    definition = head.flow(flow)
    steps = _steps(pinned) if pinned is not None else {}
    if definition is None:
        return [
            PausedRun(
                run_id,
                flow,
                waiting[0] if waiting else None,
                REMOVED,
                (
                    f"the flow is removed; {keeps}, and cannot finish if resumed after that definition is pruned"
                ),
            )
        ]
    now = {w.step.id: w.step for w in walk_steps(definition.spec.steps)}
    found: list[PausedRun] = []
    for step_id in waiting:
        if step_id not in now:
            found.append(
                PausedRun(
                    run_id,
                    flow,
                    step_id,
                    REMOVED,
                    (
                        f"step '{step_id}' is removed; {keeps}, and cannot finish if resumed after that definition "
                        "is pruned"
                    ),
                )
            )
        elif step_id in steps and step_data(steps[step_id]) != step_data(now[step_id]):
            what = "; ".join(field_changes(step_data(steps[step_id]), step_data(now[step_id]))[:3])
            found.append(
                PausedRun(
                    run_id,
                    flow,
                    step_id,
                    ALTERED,
                    (
                        f"step '{step_id}' changes ({what}); {keeps}: the change reaches new runs only"
                    ),
                )
            )
    return found


def _steps(flow: Any) -> dict[str, StepSpec]:
    spec = FlowSpec.model_validate(flow)
    return {w.step.id: w.step for w in walk_steps(spec.steps)}


def schedule_changes(base: Project, head: Project, now: datetime) -> list[ScheduleChange]:
    """Flows whose schedule's next fire time (from `now`) differs between the base and the head."""
    found: list[ScheduleChange] = []
    for name in sorted({*base.flows, *head.flows}):
        before = _schedule(base, name)
        after = _schedule(head, name)
        if before == after:
            continue
        old = _next(before, now)
        new = _next(after, now)
        if old == new:
            continue
        found.append(_schedule_change(name, old, new, before is not None, after is not None))
    return found


def _schedule_change(
    name: str, old: str | None, new: str | None, had: bool, has: bool
) -> ScheduleChange:
    detail = (
        f"next run {old or 'never'} → {new or 'never'}"
        if had and has
        else f"newly scheduled: next run {new}"
        if has
        else f"no longer scheduled (next run was {old})"
    )
    return ScheduleChange(name, old, new, detail)


def _schedule(project: Project, name: str) -> ScheduleSpec | None:
    definition = project.flow(name)
    return definition.spec.schedule if definition is not None else None


def _next(schedule: ScheduleSpec | None, now: datetime) -> str | None:
    if schedule is None:
        return None
    moment = next_fire(schedule, now)
    return (
        moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        if moment
        else None
    )


def served_schedule_changes(
    served: dict[str, ServedSchedule], head: Project, flows: set[str], now: datetime
) -> list[ScheduleChange]:
    """Flows of the change whose schedule on the server (what fires now) differs from the head's."""
    found: list[ScheduleChange] = []
    for name in sorted(flows):
        now_served = served.get(name)
        after = _schedule(head, name)
        if now_served is None and after is None:
            continue
        if (
            now_served is not None
            and after is not None
            and (now_served.cron, now_served.timezone) == (after.cron, after.timezone)
        ):
            continue
        old = _utc(now_served.next_fire) if now_served is not None else None
        new = _next(after, now)
        if old == new:
            continue
        found.append(_schedule_change(name, old, new, now_served is not None, after is not None))
    return found


def _utc(moment: str | None) -> str | None:
    """An ISO time as the listing writes it: UTC, seconds, `Z`."""
    if moment is None:
        return None
    parsed = datetime.fromisoformat(moment)
    parsed = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
