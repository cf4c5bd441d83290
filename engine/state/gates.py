"""The `gates` table: the approval gates a run waits at, and the decision taken on each.

A row is written, in the same transaction that marks the run `waiting`, for every interrupt the
execution stopped at (its id is LangGraph's interrupt id, its `request` the gate's interrupt value).
A decision claims its row with a conditional UPDATE (`... WHERE status = 'waiting'`) in one
transaction that also claims the run and records an `approval_decided` event: of two processes
deciding one gate at the same moment exactly one wins, and a refused decision changes nothing.
Rows are kept after the decision: they are the record of who decided what, and when.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from engine.core.events import APPROVAL_DECIDED, Event, RunStatus, parse_time
from engine.core.values import JsonDict
from engine.spec import parse_duration
from engine.spec.decisions import AlreadyDecided, NotWaiting
from engine.state import store
from engine.state.database import Connection
from engine.state.liveness import Owner
from engine.state.writer import Write


class GateStatus(StrEnum):
    """Where an approval gate is: waiting for a decision, or decided (and how)."""

    WAITING = "waiting"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"  # its timeout decided it


WAITING = GateStatus.WAITING
STATUS_OF = {
    "approve": GateStatus.APPROVED,
    "reject": GateStatus.REJECTED,
    "timeout": GateStatus.EXPIRED,
}
_COLUMNS = (
    "run_id",
    "interrupt_id",
    "gate",
    "step",
    "status",
    "request",
    "created",
    "timeout_at",
    "decided",
    "actor",
    "decision",
)


@dataclass(frozen=True)
class Gate:
    """One row of `gates`."""

    run_id: str
    interrupt_id: str
    gate: str  # how people name it: the step, with [index] for a map or foreach item
    step: str
    status: GateStatus
    request: JsonDict
    created: str
    timeout_at: str | None = None
    decided: str | None = None
    actor: str | None = None
    decision: JsonDict | None = field(default=None)

    @property
    def message(self) -> str:
        return str(self.request.get("message") or "")

    @property
    def fields(self) -> JsonDict:
        return dict(self.request.get("fields") or {})

    @property
    def flow(self) -> str:
        return str(self.request.get("flow") or "")

    def as_dict(self) -> JsonDict:
        return {name: getattr(self, name) for name in _COLUMNS}


def _gate(row: tuple[Any, ...]) -> Gate:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["request"] = json.loads(values["request"])
    values["decision"] = json.loads(values["decision"]) if values["decision"] is not None else None
    values["status"] = GateStatus(values["status"])
    return Gate(**values)


def _timeout_at(request: Mapping[str, Any], created: str) -> str | None:
    timeout = request.get("timeout")
    if not timeout:
        return None
    try:
        due = parse_time(created) + timedelta(seconds=parse_duration(str(timeout)))
    except OverflowError:  # a deadline past the year 9999 is no deadline
        return None
    return iso(due)


def iso(moment: datetime) -> str:
    """A datetime as the tables write times: ISO-8601 UTC with milliseconds and a Z."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---- writes -----------------------------------------------------------------------------------


def record_waiting(run_id: str, interrupts: Mapping[str, Any], now: str) -> Write:
    """Rows for the gates an execution stopped at; a gate seen before keeps its row (and its clock)."""
    rows = []
    for interrupt_id, request in interrupts.items():
        request = request if isinstance(request, dict) else {"message": str(request)}
        name = str(request.get("gate") or request.get("step") or "?")
        rows.append(
            (
                run_id,
                interrupt_id,
                name,
                str(request.get("step") or name),
                WAITING,
                store.dumps(request),
                now,
                _timeout_at(request, now),
            )
        )
    return Write(
        "INSERT OR IGNORE INTO gates (run_id, interrupt_id, gate, step, status, request, created, "
        "timeout_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
        many=True,
    )


def claim(
    gate: Gate, payload: JsonDict, me: Owner, event_data: JsonDict, time: str
) -> Callable[[Connection], Event]:
    """A writer call that records `payload` as the decision on `gate` and makes this process the
    run's owner, in one transaction; AlreadyDecided (nothing written) when the gate was decided
    already, NotWaiting when the run no longer waits. Returns the stored `approval_decided` event."""
    status = GateStatus.EXPIRED if payload.get("timed_out") else STATUS_OF[payload["decision"]]

    def apply(conn: Connection) -> Event:
        cursor = conn.execute(
            "UPDATE gates SET status = ?, decided = ?, actor = ?, decision = ? "
            "WHERE run_id = ? AND interrupt_id = ? AND status = ?",
            (
                status,
                time,
                payload.get("actor"),
                store.dumps(payload),
                gate.run_id,
                gate.interrupt_id,
                WAITING,
            ),
        )
        if cursor.rowcount != 1:
            raise AlreadyDecided(already_decided(get(conn, gate.run_id, gate.interrupt_id) or gate))
        cursor = conn.execute(
            "UPDATE runs SET status = 'running', owner_pid = ?, owner_host = ?, owner_start = ?, "
            "owner_replica = ?, lease_until = ?, error = NULL, error_step = NULL, finished = NULL "
            "WHERE id = ? AND status = ?",
            (me.pid, me.host, me.start, me.replica, me.lease_until, gate.run_id, RunStatus.WAITING),
        )
        if cursor.rowcount != 1:
            row = conn.execute("SELECT status FROM runs WHERE id = ?", (gate.run_id,)).fetchone()
            raise NotWaiting(
                f"run {gate.run_id} is {row[0] if row else 'gone'}, not waiting for an approval "
                "decision"
            )
        seq = int(
            conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE run_id = ?", (gate.run_id,)
            ).fetchone()[0]
        )
        event = Event(APPROVAL_DECIDED, gate.run_id, seq, gate.step, time, event_data)
        conn.execute(
            "INSERT INTO events (run_id, seq, type, step, time, data) VALUES (?, ?, ?, ?, ?, ?)",
            (event.run_id, event.seq, event.type, event.step, event.time, store.dumps(event.data)),
        )
        return event

    return apply


def already_decided(gate: Gate) -> str:
    """'gate 'ask' of run X was already approved by ada at 2026-...'."""
    who = f" by {gate.actor}" if gate.actor else ""
    when = f" at {gate.decided}" if gate.decided else ""
    return f"gate '{gate.gate}' of run {gate.run_id} was already {gate.status}{who}{when}"


# ---- reads ------------------------------------------------------------------------------------

_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM gates"


def get(conn: Connection, run_id: str, interrupt_id: str) -> Gate | None:
    row = conn.execute(
        f"{_SELECT} WHERE run_id = ? AND interrupt_id = ?", (run_id, interrupt_id)
    ).fetchone()
    return _gate(row) if row is not None else None


def of_run(conn: Connection, run_id: str) -> list[Gate]:
    """Every gate of a run, in the order they were reached."""
    return [
        _gate(row)
        for row in conn.execute(f"{_SELECT} WHERE run_id = ? ORDER BY created, gate", (run_id,))
    ]


def waiting(conn: Connection, *, flow: str | None = None) -> list[Gate]:
    """Every gate waiting for a decision, oldest first."""
    gates = [
        _gate(row)
        for row in conn.execute(
            f"{_SELECT} WHERE status = ? ORDER BY created, run_id, gate", (WAITING,)
        )
    ]
    return [gate for gate in gates if flow is None or gate.flow == flow]


def due(conn: Connection, now: str) -> list[Gate]:
    """Waiting gates whose timeout has passed at `now` (an `iso` time)."""
    rows = conn.execute(
        f"{_SELECT} WHERE status = ? AND timeout_at IS NOT NULL AND timeout_at <= ? "
        "ORDER BY timeout_at",
        (WAITING, now),
    )
    return [_gate(row) for row in rows]
