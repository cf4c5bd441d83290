"""What a change means for what exists now (`blockyard diff --state`): paused runs, schedules, threads.

A paused run keeps the definition it started with (its bundle is pinned in the state database by
digest, docs/runtime.md), so a change never moves a run under way: it is compared with the head
to say what the change *would* do to it. A run whose gate or step the head removes cannot finish
on the head, so if its pinned definition were pruned it could not go on. Schedules are compared
by their next fire time from now; threads by whether their flow changed (their next turn runs the
head's version).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from engine.cron import next_fire
from engine.events import RunStatus
from engine.project import Project
from engine.review.changes import REMOVED, InFlight, PausedRun, ScheduleChange, ThreadChange, YardDiff, field_changes
from engine.review.compare import step_data
from engine.spec import FlowSpec, ScheduleSpec, StepSpec
from engine.spec.walk import walk_steps
from engine.state import backends, gates, store, threads
from engine.state.location import Location

ALTERED = "altered"
MAX_LISTED = 1000  # paused runs and threads looked at


def from_state(diff: YardDiff, base: Project, head: Project, where: Location, now: datetime | None = None
               ) -> InFlight:
    """The impact on the runs, schedules and threads of the state database `where`."""
    found = InFlight(where.shown)
    found.schedules = schedule_changes(base, head, now or datetime.now(UTC))
    with backends.reading(where) as conn:
        if conn is None:
            return found
        touched = {f.name for f in diff.flows} | {f.old_name for f in diff.flows if f.old_name}
        for run in store.list_runs(conn, statuses=[RunStatus.WAITING], limit=MAX_LISTED):
            if run.flow not in touched:
                continue
            pinned = store.load_definition(conn, run.digest)
            waiting = [gate.step for gate in gates.of_run(conn, run.id) if gate.status == gates.GateStatus.WAITING]
            found.runs += paused(run.id, run.flow, run.version, pinned, waiting, head)
        for flow in sorted(touched):
            for thread in threads.list_threads(conn, flow=flow, limit=MAX_LISTED):
                change = diff.flow(flow)
                what = "removed" if change is not None and change.status == REMOVED else "changed"
                found.threads.append(ThreadChange(thread.id, flow, (
                    f"its flow {what}: the next turn runs the head's version" if what == "changed" else
                    "its flow is removed: the thread cannot take another turn")))
    return found


def paused(run_id: str, flow: str, version: int, pinned: str | None, waiting: list[str],
           head: Project) -> list[PausedRun]:
    """One line per step a paused run waits at, if the head removes or alters it."""
    keeps = f"it keeps running on its pinned version (v{version})"
    definition = head.flow(flow)
    steps = _steps(json.loads(pinned)["flow"]) if pinned is not None else {}
    if definition is None:
        return [PausedRun(run_id, flow, waiting[0] if waiting else None, REMOVED, (
            f"the flow is removed; {keeps}, and cannot finish if resumed after that definition is pruned"))]
    now = {w.step.id: w.step for w in walk_steps(definition.spec.steps)}
    found: list[PausedRun] = []
    for step_id in waiting:
        if step_id not in now:
            found.append(PausedRun(run_id, flow, step_id, REMOVED, (
                f"step '{step_id}' is removed; {keeps}, and cannot finish if resumed after that definition "
                "is pruned")))
        elif step_id in steps and step_data(steps[step_id]) != step_data(now[step_id]):
            what = "; ".join(field_changes(step_data(steps[step_id]), step_data(now[step_id]))[:3])
            found.append(PausedRun(run_id, flow, step_id, ALTERED, (
                f"step '{step_id}' changes ({what}); {keeps}: the change reaches new runs only")))
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
        detail = (f"next run {old or 'never'} → {new or 'never'}" if before and after else
                  f"newly scheduled: next run {new}" if after else f"no longer scheduled (next run was {old})")
        found.append(ScheduleChange(name, old, new, detail))
    return found


def _schedule(project: Project, name: str) -> ScheduleSpec | None:
    definition = project.flow(name)
    return definition.spec.schedule if definition is not None else None


def _next(schedule: ScheduleSpec | None, now: datetime) -> str | None:
    if schedule is None:
        return None
    moment = next_fire(schedule, now)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if moment else None
