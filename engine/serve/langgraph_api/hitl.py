"""A gate in LangChain's human-in-the-loop format, and a `{"decisions": [...]}` resume as a gate's decision.

LangChain v1's HumanInTheLoopMiddleware interrupts with `{"action_requests": [{name, args, description}],
"review_configs": [{action_name, allowed_decisions, args_schema}]}` and is resumed with `{"decisions":
[{"type": "approve" | "edit" | "reject", ...}]}`, one decision per action request; agent-chat-ui draws its
decision form for exactly that (docs/langgraph-api.md). A gate is one action: its name, its fields as the
args (each field's default), its message as the description. Its decisions map onto the engine's one shape
(`{approve, values, reason}`, engine/spec/decisions.py), which the runtime then judges like any other.
An agent's tool call waiting for a person (`approve_tools`) is one action too: the tool's name, the call's
arguments, the decisions its block allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.core.values import JsonDict, ValueDomainError
from engine.definitions.load import parse_value
from engine.serve.problems import ApiError

DECISION_TYPES = ("approve", "edit", "reject", "respond")
JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object"})


def approvable(fields: Mapping[str, Any]) -> bool:
    """Whether the gate can be approved as it asks: every field has a default (one without must be
    given a value, so only `edit` approves it; engine/spec/decisions.py)."""
    return all(isinstance(spec, Mapping) and "default" in spec for spec in fields.values())


def allowed_decisions(fields: Mapping[str, Any], allowed: Any = None) -> list[str]:
    """The decisions a gate offers: `edit` only when it has fields to set, `approve` only when it can be
    approved without them, each only if the gate allows it (`allowed`: a tool call's gate,
    engine/agents/approval.py; None: every one)."""
    offered = [
        *(["approve"] if approvable(fields) else []),
        *(["edit"] if fields else []),
        "reject",
    ]
    return offered if not isinstance(allowed, list) else [d for d in offered if d in allowed]


def request(name: str, message: Any, fields: Mapping[str, Any], allowed: Any = None) -> JsonDict:
    """The gate as a HITLRequest, offering `allowed_decisions(fields, allowed)`; `respond` (a rejection
    with a message) is accepted on resume but not offered: LangChain v1 has no such decision."""
    args = {
        key: (spec.get("default") if isinstance(spec, Mapping) else None)
        for key, spec in fields.items()
    }
    action: JsonDict = {"name": name, "args": args}
    if message is not None:
        action["description"] = str(message)
    allowed = allowed_decisions(fields, allowed)
    review: JsonDict = {"action_name": name, "allowed_decisions": allowed}
    if fields:
        review["args_schema"] = {
            "type": "object",
            "properties": {key: _schema(spec) for key, spec in fields.items()},
        }
    return {"action_requests": [action], "review_configs": [review]}


def _schema(spec: Any) -> JsonDict:
    """A field's declared type (a TypeSpec as JSON) as JSON Schema: the same words, `any` left out."""
    if not isinstance(spec, Mapping):
        return {}
    shown = {key: value for key, value in spec.items() if value is not None}
    if shown.get("type") not in JSON_TYPES:
        shown.pop("type", None)
    return shown


def is_response(resume: Any) -> bool:
    """A HITLResponse: a mapping whose `decisions` holds a list."""
    return isinstance(resume, Mapping) and isinstance(resume.get("decisions"), list)


def _refuse(message: str) -> ApiError:
    return ApiError(
        422,
        "invalid_request",
        f"command.resume.decisions: {message}",
        field="command.resume.decisions",
    )


def decision(resume: Mapping[str, Any], fields: Mapping[str, Any]) -> JsonDict:
    """`{"decisions": [one decision]}` as the engine's decision; `fields` are the gate's declared fields
    (empty when unknown), used to read an edit's text the way `--set` on the command line does."""
    extra = sorted(str(key) for key in resume if key != "decisions")
    if extra:
        raise _refuse(f"a decisions answer holds only `decisions` (got {', '.join(extra)})")
    decisions = resume["decisions"]
    if len(decisions) != 1 or not isinstance(decisions[0], Mapping):
        raise _refuse(
            'a gate is one action: send one decision, {"type": "approve" | "edit" | "reject" | '
            f'"respond"}} (got {len(decisions)} items)'
        )
    answer: Mapping[str, Any] = decisions[0]
    kind = answer.get("type")
    if kind == "approve":
        return {"approve": True}
    if kind == "edit":
        return {"approve": True, "values": _edited(answer.get("edited_action"), fields)}
    if kind in ("reject", "respond"):
        message = answer.get("message")
        if message is not None and not isinstance(message, str):
            raise _refuse(f"a {kind} decision's `message` must be text")
        return {"approve": False, **({"reason": message} if message else {})}
    raise _refuse(f"unknown decision type {str(kind)[:40]!r}: use {', '.join(DECISION_TYPES)}")


def _edited(action: Any, fields: Mapping[str, Any]) -> JsonDict:
    """An edit's args as the gate's field values. A null arg is a field left unset (the request shows a
    field without a default as null); text for a field not declared a string is read as YAML, like
    `--set b=5`, since a form edits every value as text. The runtime judges the result (a wrong type or an
    unknown field is a 422 naming it)."""
    args = action.get("args") if isinstance(action, Mapping) else None
    if not isinstance(args, Mapping):
        raise _refuse(
            'an edit decision carries {"edited_action": {"name": ..., "args": {field: value}}}'
        )
    values: JsonDict = {}
    for key, value in args.items():
        if value is None:
            continue
        spec = fields.get(key)
        declared = spec.get("type") if isinstance(spec, Mapping) else None
        if isinstance(value, str) and spec is not None and declared != "string":
            try:
                value = parse_value(value)
            except ValueDomainError as exc:
                raise _refuse(f"field '{key}': {exc}") from None
        values[str(key)] = value
    return values
