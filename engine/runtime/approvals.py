"""Deciding approval gates, and going on with the runs that wait at them.

A decision is judged before anything is written (the run must wait, the gate must exist and
wait, the person must be an approver, the values must fit the gate's fields); then it is claimed
in one transaction (engine/state/gates.py), and only then is the graph resumed — by interrupt
id, with ids taken from the checkpoint's pending interrupts (LangGraph ignores an unknown id
silently, and resuming with `None` could re-use an old answer: docs/approvals.md).

A decision whose process died before the graph took it stays claimed; the next plain
`blockyard resume RUN_ID` hands it to the graph (engine/runtime/resumes.py). Gates past their
timeout are decided according to their `on_timeout` (`on_timeout` here, `Engine.expire` in
engine/runtime/engine.py). Where the other parts of approvals live: docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.core.diagnostics import did_you_mean
from engine.core.events import Event, RunStatus, now_iso
from engine.core.values import JsonDict, value_problem
from engine.spec.decisions import (
    APPROVE,
    REJECT,
    TIMEOUT,
    AlreadyDecided,
    Decision,
    DecisionRefused,
    NotWaiting,
    check_decision,
)
from engine.state import gates, liveness
from engine.state.checkpointer import StateDB
from engine.state.gates import WAITING, Gate
from engine.state.store import RunRecord, effective_status


@dataclass(frozen=True)
class Ask:
    """A decision someone asks for: approve, reject, or (expiry only) timeout."""

    decision: str
    values: JsonDict = field(default_factory=dict)
    reason: str | None = None
    gate: str | None = None
    actor: str | None = None
    timed_out: bool = False


def ask(
    approve: bool | None,
    values: Mapping[str, Any] | None,
    reason: str | None,
    gate: str | None,
    actor: str | None,
) -> Ask | None:
    """The Ask of the Python API's keyword arguments; None when there is no decision."""
    if approve is None:
        extra = [
            name
            for name, value in (
                ("values", values),
                ("reason", reason),
                ("gate", gate),
                ("actor", actor),
            )
            if value
        ]
        if extra:
            raise DecisionRefused(
                f"{', '.join(extra)} given without a decision: approve=True or approve=False"
            )
        return None
    for name, given in (
        ("values", dict(values or {})),
        ("reason", reason),
        ("gate", gate),
        ("actor", actor),
    ):
        problem = value_problem(given, name)
        if problem is not None:  # refused before anything is written: no database could store it
            raise DecisionRefused(f"decision {problem}")
    return Ask(APPROVE if approve else REJECT, dict(values or {}), reason, gate, actor)


def check_waiting(record: RunRecord, rows: Sequence[Gate] = (), wanted: str | None = None) -> None:
    """A decision needs a run that waits for one. On a run that does not, the refusal is the gate's
    own when one of its gates (`rows`; the one `wanted` names, if any) was decided already: the
    decision lost a race or came a second time (AlreadyDecided); else NotWaiting."""
    status = effective_status(record)
    if status == RunStatus.WAITING:
        return
    not_waiting = f"run {record.id} is {status}, not waiting for an approval decision"
    gate = last_decided(rows, wanted)
    if gate is not None:
        raise AlreadyDecided(f"{gates.already_decided(gate)}; {not_waiting}")
    raise NotWaiting(not_waiting)


async def check_decidable(db: StateDB, record: RunRecord, wanted: str | None) -> None:
    """`check_waiting` on the run as it is recorded, its gates read only when it does not wait."""
    if effective_status(record) != RunStatus.WAITING:
        rows = await db.aread(lambda conn: gates.of_run(conn, record.id))
        check_waiting(record, rows, wanted)


def last_decided(rows: Sequence[Gate], wanted: str | None) -> Gate | None:
    """The gate decided last among `rows` (those `wanted` names: its name, step or interrupt id), if any."""
    decided = [
        g
        for g in rows
        if g.status != WAITING and (wanted is None or wanted in (g.gate, g.step, g.interrupt_id))
    ]
    return max(decided, key=lambda g: g.decided or "") if decided else None


def choose(
    rows: Sequence[Gate], pending: Mapping[str, Any], wanted: str | None, run_id: str
) -> Gate:
    """The gate a decision is for: the only waiting one, or the one `wanted` names (its name, its
    step when only one item of it waits, or its interrupt id or a prefix of six characters or more)."""
    open_ = [g for g in rows if g.status == WAITING and g.interrupt_id in pending]
    if not open_:
        # someone decided it a moment ago (the run is going on); say who
        recent = last_decided(rows, wanted)
        if recent is not None:
            raise AlreadyDecided(gates.already_decided(recent))
        raise DecisionRefused(f"run {run_id} has no gate waiting for a decision")
    names = ", ".join(g.gate for g in open_)
    if wanted is None:
        if len(open_) == 1:
            return open_[0]
        raise DecisionRefused(
            f"run {run_id} waits at {len(open_)} gates ({names}): pick one with --gate"
        )
    for candidates in (
        [g for g in open_ if wanted in (g.gate, g.interrupt_id)],
        [g for g in open_ if g.step == wanted],
        [g for g in open_ if len(wanted) >= 6 and g.interrupt_id.startswith(wanted)],
    ):
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1:
            raise DecisionRefused(
                f"gate '{wanted}' of run {run_id} waits for {len(candidates)} items "
                f"({', '.join(g.gate for g in candidates)}): pick one with --gate"
            )
    decided = last_decided(rows, wanted)
    if decided is not None:
        raise AlreadyDecided(gates.already_decided(decided))
    raise DecisionRefused(
        f"run {run_id} has no gate '{wanted}' waiting{did_you_mean(wanted, [g.gate for g in open_])}"
        f"; waiting: {names}"
    )


def carried(rows: Sequence[Gate], pending: Mapping[str, Any], but: str | None = None) -> JsonDict:
    """Decisions already claimed for gates the graph still waits at (their process died before
    handing them over): interrupt id -> decision."""
    return {
        g.interrupt_id: g.decision
        for g in rows
        if g.status != WAITING
        and g.decision is not None
        and g.interrupt_id in pending
        and g.interrupt_id != but
    }


async def decide(
    db: StateDB, record: RunRecord, pending: Mapping[str, Any], wanted: Ask
) -> tuple[JsonDict, Event]:
    """Judge and claim a decision; returns the resume map (interrupt id -> decision) and the
    recorded `approval_decided` event. DecisionRefused leaves everything as it was."""
    rows = await db.aread(lambda conn: gates.of_run(conn, record.id))
    check_waiting(record, rows, wanted.gate)
    gate = choose(rows, pending, wanted.gate, record.id)
    values = check_decision(
        gate.request, wanted.decision, wanted.values, wanted.actor, timed_out=wanted.timed_out
    )
    now = now_iso()
    decision = Decision(wanted.decision, values, wanted.actor, wanted.reason, now, wanted.timed_out)
    data = {"gate": gate.gate, "interrupt_id": gate.interrupt_id, **decision.payload()}
    event = await db.writer.call(
        gates.claim(gate, decision.payload(), liveness.current(), data, now)
    )
    return {
        gate.interrupt_id: decision.payload(),
        **carried(rows, pending, but=gate.interrupt_id),
    }, event


def on_timeout(gate: Gate) -> Ask:
    """What a gate's timeout decides: its `on_timeout` (approve, reject, or a step to go to)."""
    action = str(gate.request.get("on_timeout") or REJECT)
    decision = action if action in (APPROVE, REJECT) else TIMEOUT
    timeout = gate.request.get("timeout")
    return Ask(
        decision,
        {},
        f"no decision within {timeout}" if timeout else "timed out",
        gate.interrupt_id,
        None,
        timed_out=True,
    )


@dataclass(frozen=True)
class Expired:
    """A gate decided by its timeout, and how the run's execution then ended."""

    run_id: str
    gate: str
    action: str  # approve | reject | the step on_timeout names
    status: RunStatus  # the run's status afterwards: finished | failed | waiting | ...
    error: str | None = None

    def as_dict(self) -> JsonDict:
        return {
            "run_id": self.run_id,
            "gate": self.gate,
            "action": self.action,
            "status": self.status,
            "error": self.error,
        }
