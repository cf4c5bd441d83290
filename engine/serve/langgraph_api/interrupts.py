"""Approval gates as LangGraph interrupts, and `command: {resume: ...}` as a gate's decision.

A waiting gate is an interrupt whose id is the gate's interrupt id and whose value is what the gate asks
(`gate`, `step`, `message`, `fields`, ...: docs/approvals.md), plus the fields chat UIs render as a form:
LangChain's human-in-the-loop request (`action_requests`, `review_configs`: hitl.py) and the older agent-inbox
schema (`action_request`, `config`, `description`). A resume value decides it — the runtime then judges the
decision like any other (engine/runtime/approvals.py): a wrong field or value is a 422 and the run keeps waiting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.values import JsonDict
from engine.serve.langgraph_api import hitl
from engine.serve.langgraph_api.shapes import Interrupt
from engine.serve.problems import ApiError

APPROVE_WORDS = frozenset({"approve", "approved", "accept", "accepted", "yes", "continue"})
REJECT_WORDS = frozenset({"reject", "rejected", "ignore", "deny", "denied", "no"})
DECISION_KEYS = ("approve", "decision", "values", "reason", "actor", "gate")


def interrupt(gate: Mapping[str, Any]) -> Interrupt:
    """One waiting gate (the data of its approval_required event) as a LangGraph interrupt."""
    asked = gate.get("value")
    value: JsonDict = dict(asked) if isinstance(asked, Mapping) else {"message": asked}
    given = value.get("fields")
    fields: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    # a tool call's gate (engine/agents/approval.py) is shown as the call: the tool's name and arguments
    tool = value.get("tool") if value.get("kind") == "tool" else None
    name = str(tool or value.get("gate") or value.get("step") or "approval")
    allowed = hitl.allowed_decisions(fields, value.get("allowed"))
    value.setdefault("description", value.get("message"))
    value["action_request"] = {
        "action": name,
        "args": {
            key: (spec.get("default") if isinstance(spec, Mapping) else None)
            for key, spec in fields.items()
        },
    }
    value["config"] = {
        "allow_accept": "approve" in allowed,
        "allow_edit": "edit" in allowed,
        "allow_respond": False,
        "allow_ignore": "reject" in allowed,
    }
    value.update(hitl.request(name, value.get("message"), fields, value.get("allowed")))
    return {"value": value, "id": str(gate.get("interrupt_id") or name)}


def _refuse(message: str) -> ApiError:
    return ApiError(422, "invalid_request", f"command.resume: {message}", field="command.resume")


def decision(
    resume: Any, gates: Sequence[Mapping[str, Any]], chosen: str | None = None
) -> JsonDict:
    """A resume value as the decision POST /runs/{id}/resume takes ({approve, values, reason, gate, actor}).

    `gates` are the waiting gates (their approval_required data). The value is `true`/`false`;
    "approve"/"reject"; a mapping of the gate's field values with `approve` (default true), `reason`,
    `actor`, `gate` (or `values` holding the fields); LangChain's `{"decisions": [{"type": "approve" | "edit" |
    "reject" | "respond", ...}]}` (hitl.py); the agent-inbox answer `[{"type": "accept" | "edit" | "ignore" |
    "response", "args": ...}]`; or any of these keyed by the interrupt id."""
    waiting = [str(gate.get("interrupt_id")) for gate in gates]
    if isinstance(resume, Mapping) and len(resume) == 1 and next(iter(resume)) in waiting:
        interrupt_id, value = next(iter(resume.items()))
        return {**decision(value, gates, interrupt_id), "gate": interrupt_id}
    if hitl.is_response(resume):
        return hitl.decision(resume, _fields(gates, chosen))
    if isinstance(resume, bool):
        return {"approve": resume}
    if isinstance(resume, str):
        word = resume.strip().lower()
        if word in APPROVE_WORDS or word in REJECT_WORDS:
            return {"approve": word in APPROVE_WORDS}
        raise _refuse(
            f'\'{resume[:80]}\' is not a decision: send true or false, "approve" or "reject", or a '
            "mapping of the gate's field values"
        )
    if isinstance(resume, list):
        if len(resume) != 1 or not isinstance(resume[0], Mapping):
            raise _refuse(
                'a list must hold one answer, {"type": "accept" | "edit" | "ignore" | "response"}'
            )
        return _inbox(resume[0])
    if isinstance(resume, Mapping):
        return _mapping(resume)
    raise _refuse(
        'send true or false, "approve" or "reject", or a mapping of the gate\'s field values'
    )


def _fields(gates: Sequence[Mapping[str, Any]], chosen: str | None) -> Mapping[str, Any]:
    """The declared fields of the gate a decision is for: the one named, else the only one waiting."""
    named = [g for g in gates if chosen is None or str(g.get("interrupt_id")) == chosen]
    asked = named[0].get("value") if len(named) == 1 else None
    fields = asked.get("fields") if isinstance(asked, Mapping) else None
    return fields if isinstance(fields, Mapping) else {}


def _inbox(answer: Mapping[str, Any]) -> JsonDict:
    kind, args = answer.get("type"), answer.get("args")
    if kind == "accept":
        return {"approve": True}
    if kind == "edit":
        edited = args.get("args") if isinstance(args, Mapping) else None
        if not isinstance(edited, Mapping):
            raise _refuse(
                'an `edit` answer carries {"args": {"action": ..., "args": {field: value}}}'
            )
        return {"approve": True, "values": dict(edited)}
    if kind in ("ignore", "response"):
        return {"approve": False, **({"reason": args} if isinstance(args, str) and args else {})}
    raise _refuse(f"unknown answer type {kind!r}: use accept, edit, ignore or response")


def _mapping(resume: Mapping[str, Any]) -> JsonDict:
    approve: Any = resume.get("approve", True)
    said = resume.get("decision")
    if said is not None:
        word = str(said).strip().lower()
        if word not in APPROVE_WORDS and word not in REJECT_WORDS:
            raise _refuse(f"decision '{str(said)[:80]}' is neither approve nor reject")
        approve = word in APPROVE_WORDS
    if not isinstance(approve, bool):
        raise _refuse("`approve` must be true or false")
    values = resume.get("values")
    if values is not None and not isinstance(values, Mapping):
        raise _refuse("`values` must be a mapping of the gate's field values")
    fields = {key: value for key, value in resume.items() if key not in DECISION_KEYS}
    if values is not None and fields:
        raise _refuse(
            f"give the field values in `values` or beside `approve`, not both ({', '.join(fields)})"
        )
    for key in ("reason", "actor", "gate"):
        if resume.get(key) is not None and not isinstance(resume[key], str):
            raise _refuse(f"`{key}` must be text")
    found: JsonDict = {"approve": approve, "values": dict(values or fields)}
    found.update(
        {key: resume[key] for key in ("reason", "actor", "gate") if resume.get(key) is not None}
    )
    return found
