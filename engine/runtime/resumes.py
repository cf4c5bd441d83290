"""Going on with a run that stopped: after a crash or failure, or with a decision on a gate.

The run continues on its pinned definition (the bundle stored under its digest), whatever the
files say now (`Engine.resume`, engine/runtime/engine.py). What the graph is resumed with depends
on where its checkpoint stands:
- a decision was given: it is judged and claimed first (engine/runtime/approvals.py), then the
  graph resumes with it, by interrupt id;
- the graph waits at gates whose decisions were claimed by a process that died before handing
  them over: it resumes with those;
- the graph waits at gates nobody decided (its process died as it paused): the run waits again,
  without running anything;
- otherwise it goes on from its last checkpoint (never with `None` while interrupts are pending).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError
from engine.core.events import Event, RunStatus
from engine.core.values import JsonDict
from engine.runtime import approvals
from engine.runtime.approvals import Ask
from engine.spec.durability import NO_CHECKPOINTS
from engine.state import gates, liveness, store, threads
from engine.state.checkpointer import StateDB
from engine.state.store import RunRecord, effective_status


@dataclass(frozen=True)
class GoOn:
    """How the graph of a stopped run goes on."""

    # interrupt id -> decision, for Command(resume=...)
    resume: JsonDict = field(default_factory=dict)
    # the recorded approval_decided event, if any
    preface: list[Event] = field(default_factory=list)
    wait_again: JsonDict | None = (
        None  # gates to wait at again without running (interrupt id -> request)
    )


async def stopped_run(db: StateDB, run_id: str, wanted: Ask | None) -> RunRecord:
    """The run `run_id`, when it can go on: with a decision it must wait for one, without one it
    must have failed or been interrupted; UsageError or DecisionRefused (nothing changed) if not."""
    record = await db.aread(lambda conn: store.get_run(conn, run_id))
    if record is None:
        known = await db.aread(store.run_ids)
        raise UsageError(f"unknown run '{run_id}'{did_you_mean(run_id, known)}")
    if wanted is None:
        check_resumable(record)
    else:
        await approvals.check_decidable(db, record, wanted.gate)
    thread_id = record.thread_id
    if thread_id is not None:
        await db.aread(lambda conn: threads.check_current(conn, thread_id, run_id))
    return record


async def how_to_go_on(
    db: StateDB, record: RunRecord, pending: Mapping[str, Any], wanted: Ask | None
) -> GoOn:
    """What the graph resumes with, given the interrupts its checkpoint waits at (`pending`): a
    decision is judged and claimed; without one the run is claimed for this process."""
    if wanted is not None:
        resume, decided = await approvals.decide(db, record, pending, wanted)
        return GoOn(resume=resume, preface=[decided])
    me = liveness.current()
    if not await db.writer.call(
        store.claim(record.id, record, me.pid, me.host, me.start, me.replica, me.lease_until)
    ):
        raise UsageError(f"run {record.id} was just resumed by another process")
    if pending:
        carried = approvals.carried(
            await db.aread(lambda conn: gates.of_run(conn, record.id)), pending
        )
        return GoOn(resume=carried) if carried else GoOn(wait_again=dict(pending))
    return GoOn()


async def take_queued(db: StateDB, record: RunRecord) -> None:
    """Start a queued run that no live server holds (it stopped or died first) in this process:
    hold it (store.adopt_queued), then turn it `running` (store.start_queued); UsageError when
    another process was quicker."""
    me = liveness.current()
    if (
        not await db.writer.call(store.adopt_queued(record, me))
        or await db.writer.call(store.start_queued(record.id, me, limit=None))
        != store.Admission.STARTED
    ):
        raise UsageError(f"run {record.id} was just started by another process")


def check_resumable(record: RunRecord) -> None:
    """A run can go on without a decision when it failed or was interrupted, and kept checkpoints."""
    status = effective_status(record)
    if status == RunStatus.FINISHED:
        raise UsageError(f"run {record.id} already finished; nothing to resume")
    if status == RunStatus.RUNNING:
        raise UsageError(
            f"run {record.id} is still running (process {record.owner_pid} on {record.owner_host})"
        )
    if status == RunStatus.QUEUED:
        raise UsageError(
            f"run {record.id} is queued in a server (process {record.owner_pid} on {record.owner_host}), "
            "which starts it once it has a free slot"
        )
    if status == RunStatus.WAITING:
        raise UsageError(
            f"run {record.id} is waiting for an approval: decide it with "
            f"`blockyard resume {record.id} --approve` or `--reject`"
        )
    if record.mode in NO_CHECKPOINTS and record.status != RunStatus.QUEUED:
        # a queued run never ran
        raise UsageError(
            f"run {record.id} cannot be resumed: it ran with durability {record.mode} and kept no "
            f"checkpoint; start a new run of flow '{record.flow}'"
        )


def check_checkpointed(record: RunRecord) -> None:
    """A run without any checkpoint goes on from its inputs, unless its mode is why it has none:
    an `exit` run checkpoints only when it ends or pauses, so one that died on the way kept nothing
    to go on from, and starting it over would run its finished steps again unannounced."""
    if record.mode == "exit":
        raise UsageError(
            f"run {record.id} cannot be resumed: it ran with durability exit and stopped before it "
            f"kept a checkpoint; start a new run of flow '{record.flow}'"
        )
