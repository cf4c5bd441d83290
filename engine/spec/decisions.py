"""Decisions on approval gates: what a gate asks (its request) and what a person answers.

A gate node pauses with a *request* (the interrupt's value, JSON):
`{kind, gate, step, index, flow, message, fields, approvers, timeout, on_reject, on_timeout}`
where `fields` maps each field to its declared type (a TypeSpec as JSON). It is resumed with a
*decision* (the resume value, JSON): `{decision, values, actor, reason, time, timed_out}`, where
`decision` is `approve`, `reject` or `timeout` (an `on_timeout` that names a step).

`check_decision` is the one place a decision is judged: the runtime calls it before it records
anything (so a refused decision changes nothing) and the gate node calls it again on the value it
receives. Imports no LangGraph.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError
from engine.core.values import JsonDict, value_problem
from engine.spec import ApprovalSpec, StepSpec, TypeSpec
from engine.spec.typecheck import TypeMismatch, conform

APPROVE, REJECT, TIMEOUT = "approve", "reject", "timeout"
DECISIONS = (APPROVE, REJECT, TIMEOUT)


class DecisionRefused(UsageError):
    """A decision that cannot be taken: wrong run state, gate, field, value or person (exit 2)."""


class NotWaiting(DecisionRefused):
    """A decision for a run that waits for none (it is running, finished, failed, ...): over HTTP a
    conflict with the run's state, 409 `not_waiting` (exit 2 like every refused decision)."""

    http_status = 409
    code = "not_waiting"


class AlreadyDecided(NotWaiting):
    """A decision on a gate decided already: someone else's won the race (the gate's claim is one
    conditional write, engine/state/gates.py), or it is a second decision. Over HTTP 409
    `already_decided`, whose message is the gate's own: 'gate 'ask' of run X was already approved by
    ada at ...' (exit 2)."""

    code = "already_decided"


@dataclass(frozen=True)
class Decision:
    """One decision on one gate, as the gate node receives it."""

    decision: str  # approve | reject | timeout
    values: JsonDict
    actor: str | None
    reason: str | None
    time: str
    timed_out: bool = False

    @property
    def approved(self) -> bool:
        return self.decision == APPROVE

    def payload(self) -> JsonDict:
        """The JSON resume value."""
        return {
            "decision": self.decision,
            "values": dict(self.values),
            "actor": self.actor,
            "reason": self.reason,
            "time": self.time,
            "timed_out": self.timed_out,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> Decision:
        """The decision a gate is resumed with: `{"decision": "approve"|"reject", ...}`, or with the alias
        `"approve": true|false` for `decision` (the HTTP API's older shape, `chosen`)."""
        if (
            isinstance(payload, Mapping)
            and "decision" not in payload
            and isinstance(payload.get("approve"), bool)
        ):
            payload = {**payload, "decision": chosen(None, payload["approve"])}
        if not isinstance(payload, Mapping) or payload.get("decision") not in DECISIONS:
            raise DecisionRefused(f"not a gate decision: {payload!r}")
        values = payload.get("values") or {}
        if not isinstance(values, Mapping):
            raise DecisionRefused(f"decision values must be a mapping, got {type(values).__name__}")
        return cls(
            str(payload["decision"]),
            dict(values),
            _text(payload.get("actor")),
            _text(payload.get("reason")),
            str(payload.get("time") or ""),
            bool(payload.get("timed_out")),
        )


def chosen(decision: str | None, approve: bool | None) -> str | None:
    """The one shape of a person's decision everywhere (docs/approvals.md): `decision` is `approve` or
    `reject`; `approve` true or false is its alias (`--approve`/`--reject` on the command line,
    `{"approve": true}` over HTTP and in a standalone graph). None when neither is given;
    DecisionRefused when both are and disagree, or `decision` is another word."""
    if decision is not None and decision not in (APPROVE, REJECT):
        raise DecisionRefused(f"unknown decision {decision!r}: approve or reject")
    alias = None if approve is None else APPROVE if approve else REJECT
    if decision is not None and alias is not None and decision != alias:
        raise DecisionRefused(
            f"decision {decision!r} and approve={str(approve).lower()} disagree: give one of them"
        )
    return decision if decision is not None else alias


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def gate_spec(step: StepSpec) -> ApprovalSpec | None:
    """The gate in front of a step (`require_approval: true` is a gate with the default settings)."""
    if step.require_approval is False:
        return None
    return (
        step.require_approval if isinstance(step.require_approval, ApprovalSpec) else ApprovalSpec()
    )


def field_specs(request: Mapping[str, Any]) -> dict[str, TypeSpec]:
    """The gate's fields as TypeSpecs (they travel as JSON in the request)."""
    return {
        name: TypeSpec.model_validate(spec) for name, spec in (request.get("fields") or {}).items()
    }


def fields_json(fields: Mapping[str, TypeSpec]) -> JsonDict:
    """Fields as they travel in a request: only what the author wrote (so `default` stays optional)."""
    return {name: spec.model_dump(mode="json", exclude_unset=True) for name, spec in fields.items()}


def gate_name(request: Mapping[str, Any]) -> str:
    """How people name a gate: its step, with `[index]` for a map or foreach item."""
    return str(request.get("gate") or request.get("step") or "?")


def _check_allowed(
    request: Mapping[str, Any], gate: str, decision: str, given: Mapping[str, Any]
) -> None:
    """The decisions a gate allows (`allowed`: a tool call's gate, engine/agents/approval.py): an
    approval that changes a field is an edit, one that changes none an approval as asked."""
    allowed = request.get("allowed")
    if not isinstance(allowed, list) or decision not in (APPROVE, REJECT):
        return
    fields = request.get("fields") or {}
    edits = any(
        name in given and (fields.get(name) or {}).get("default") != given[name] for name in given
    )
    word = REJECT if decision == REJECT else "edit" if edits else APPROVE
    if word in allowed:
        return
    how = {
        APPROVE: "approve it as asked",
        "edit": "change its arguments (--set NAME=VALUE)",
        REJECT: "reject it",
    }
    said = {APPROVE: "approved as asked", "edit": "edited", REJECT: "rejected"}[word]
    raise DecisionRefused(
        f"gate '{gate}' cannot be {said}: its block allows only to "
        + " or ".join(how[w] for w in (APPROVE, "edit", REJECT) if w in allowed)
    )


def check_decision(
    request: Mapping[str, Any],
    decision: str,
    values: Mapping[str, Any] | None,
    actor: str | None,
    *,
    timed_out: bool = False,
) -> JsonDict:
    """The values to write for `decision` on the gate that asked `request`, type-checked (defaults
    filled in on approval); DecisionRefused says what is wrong, naming the gate and the field.
    A timeout decides by itself: the approvers do not apply to it."""
    gate = gate_name(request)
    if decision not in DECISIONS:
        raise DecisionRefused(f"gate '{gate}': unknown decision '{decision}' (approve or reject)")
    approvers = [str(name) for name in request.get("approvers") or []]
    if approvers and not timed_out and decision != TIMEOUT:
        allowed = ", ".join(approvers)
        if actor is None:
            raise DecisionRefused(
                f"gate '{gate}' may only be decided by {allowed}: say who you are with --as NAME"
            )
        if actor not in approvers:
            raise DecisionRefused(
                f"'{actor}' may not decide gate '{gate}': its approvers are {allowed}"
            )
    fields = field_specs(request)
    given = dict(values or {})
    _check_allowed(request, gate, decision, given)
    unknown = [name for name in given if name not in fields]
    if unknown:
        name = unknown[0]
        if not fields:
            raise DecisionRefused(
                f"gate '{gate}' has no fields, so it takes no values (got '{name}')"
            )
        raise DecisionRefused(
            f"gate '{gate}' has no field '{name}'{did_you_mean(name, fields)}; "
            f"its fields: {', '.join(fields)}"
        )
    checked: JsonDict = {}
    for name, spec in fields.items():
        if name in given:
            problem = value_problem(given[name], name)
            if problem is not None:
                raise DecisionRefused(f"gate '{gate}': field {problem}")
            try:
                checked[name] = conform(given[name], spec, name)
            except TypeMismatch as exc:
                raise DecisionRefused(f"gate '{gate}': field {exc}") from None
        elif decision == APPROVE:
            if not spec.has_default:
                raise DecisionRefused(
                    f"gate '{gate}' needs field '{name}' to approve (--set {name}=...)"
                )
            checked[name] = copy.deepcopy(spec.default)
    return checked
