"""Going on with a run that stopped: after a crash or failure, or with a decision on a gate.

The run continues on its pinned definition (the bundle stored under its digest), whatever the
files say now. What the graph is resumed with depends on where its checkpoint stands:
- a decision was given: it is judged and claimed first (engine/runtime/approvals.py), then the
  graph resumes with it, by interrupt id;
- the graph waits at gates whose decisions were claimed by a process that died before handing
  them over: it resumes with those;
- the graph waits at gates nobody decided (its process died as it paused): the run waits again,
  without running anything;
- otherwise it goes on from its last checkpoint (never with `None` while interrupts are pending).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.bundle import Bundle
from engine.compile.reduce import empty
from engine.decisions import DecisionRefused
from engine.diagnostics import did_you_mean
from engine.errors import UsageError
from engine.runtime import approvals, gates, owner, store, threads
from engine.runtime.approvals import Ask, Expired
from engine.runtime.events import Event
from engine.runtime.gates import iso
from engine.runtime.runner import Execution
from engine.runtime.store import RunRecord, StateError, effective_status

if TYPE_CHECKING:
    from engine.runtime.yard import Yard


async def prepare(yard: Yard, run_id: str, wanted: Ask | None) -> Execution:
    """The next execution of run `run_id`; UsageError (nothing changed) when it cannot go on."""
    from langgraph.types import Command

    db = yard.db
    record = await db.aread(lambda conn: store.get_run(conn, run_id))
    if record is None:
        known = await db.aread(store.run_ids)
        raise UsageError(f"unknown run '{run_id}'{did_you_mean(run_id, known)}")
    if wanted is None:
        check_resumable(record)
    else:
        approvals.check_waiting(record)
    thread_id = record.thread_id
    if thread_id is not None:
        await db.aread(lambda conn: threads.check_current(conn, thread_id, run_id))
    text = await db.aread(lambda conn: store.load_definition(conn, record.digest))
    if text is None:
        raise StateError(f"run {run_id}: its definition {record.digest} is missing from the state database")
    bundle = yard.pinned(Bundle.from_json(text), record.digest, text)
    compiled = yard.compiled(bundle)
    state = await compiled.graph.aget_state({"configurable": {"thread_id": thread_id or run_id}})
    pending = {item.id: item.value for item in state.interrupts}
    preface: list[Event] = []
    again: dict[str, Any] | None = None
    start: Any = None
    if wanted is not None:
        resume, decided = await approvals.decide(db, record, pending, wanted)
        start, preface = Command(resume=resume), [decided]
    else:
        me = owner.current()
        if not await db.writer.call(store.claim(run_id, record, me.pid, me.host, me.start)):
            raise UsageError(f"run {run_id} was just resumed by another process")
        if pending:
            resume = approvals.carried(await db.aread(lambda conn: gates.of_run(conn, run_id)), pending)
            if resume:
                start = Command(resume=resume)
            else:
                again = pending
        elif state.created_at is None:  # died before its first checkpoint: start over from its inputs
            start = threads.turn_state(record.inputs, run_id, empty(compiled.accumulated)) if thread_id \
                else compiled.initial_state(record.inputs)
    last = await db.aread(lambda conn: store.last_seq(conn, run_id))
    return await yard.execution(bundle, compiled, record, start, last_seq=last, resumed=True,
                                values=dict(state.values) if state.values else None, preface=preface,
                                pending=again)


def check_resumable(record: RunRecord) -> None:
    """A run can go on without a decision when it failed or was interrupted."""
    status = effective_status(record)
    if status == "finished":
        raise UsageError(f"run {record.id} already finished; nothing to resume")
    if status == "running":
        raise UsageError(f"run {record.id} is still running (process {record.owner_pid} on {record.owner_host})")
    if status == "waiting":
        raise UsageError(f"run {record.id} is waiting for an approval: decide it with "
                         f"`blockyard resume {record.id} --approve` or `--reject`")


async def expire(yard: Yard, now: datetime | None = None) -> list[Expired]:
    """Decide every gate whose timeout has passed at `now` by its `on_timeout`, and go on with
    its run; a gate someone decides first (or whose run is busy) is left alone."""
    from engine.runtime.yard import collect

    moment = iso(now or datetime.now().astimezone())
    due = await yard.db.aread(lambda conn: gates.due(conn, moment))
    expired: list[Expired] = []
    for gate in due:
        wanted = approvals.on_timeout(gate)
        try:
            execution = await prepare(yard, gate.run_id, wanted)
        except DecisionRefused:
            continue  # decided meanwhile, or the run is busy with another gate: the next round sees it
        result = await collect(execution)
        action = wanted.decision if wanted.decision != "timeout" else str(gate.request.get("on_timeout"))
        expired.append(Expired(gate.run_id, gate.gate, action, result.status, result.error))
    return expired
