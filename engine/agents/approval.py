"""A person's decision before an agent's tool call (`approve_tools:` on an agent block, docs/agents.md).

The call waits as an approval gate of kind `tool`: LangGraph's `interrupt()` in the tool call's own
node of the agent's graph, which then keeps checkpoints of its own (engine/agents/graph.py), so the
run resumes inside the loop — the model is not asked again, the calls answered before stay answered.
The gate's request is a gate's (engine/spec/decisions.py) with the call's arguments as its fields,
each defaulting to what the model gave; `allowed` says which decisions the block allows. Approve runs
the call as asked, edit (an approval with changed fields) runs it with the changed arguments, reject
runs nothing and tells the model why in the call's result. `check_decision` judges the decision, in
the runtime before anything is recorded and here again on the value the graph is resumed with.

Everything before `interrupt()` runs again when the run resumes: it only reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.types import interrupt

from engine.core.values import JsonDict
from engine.spec.decisions import REJECT, Decision, check_decision

if TYPE_CHECKING:
    from engine.agents.plan import AgentRun

KIND = "tool"  # the gate kind of a tool call waiting for a person
JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object"})
SHOWN = 300  # characters of the arguments shown in the gate's message


@dataclass(frozen=True)
class Decided:
    """What a person decided on one tool call: the arguments to run it with, or a rejection."""

    args: JsonDict
    rejected: bool
    actor: str | None
    reason: str | None

    def told(self, tool: str) -> str:
        """What the model is told of a rejected call, as the call's result."""
        who = f" ({self.actor})" if self.actor else ""
        why = f": {self.reason}" if self.reason else "."
        return f"A person{who} rejected this call of '{tool}', so it did not run{why}"


def gate_name(label: str, index: Any, tool: str, nth: int) -> str:
    """How people name the gate: `<step>:<tool>` (`<step>[<item>]:<tool>` in a map or foreach), with
    `#<n>` when the turn calls the tool more than once."""
    where = label if index is None else f"{label}[{index}]"
    return f"{where}:{tool}" + (f"#{nth}" if nth > 1 else "")


def request(run: AgentRun, call: Mapping[str, Any], allowed: Sequence[str]) -> JsonDict:
    """The gate's request for `call` (name, args, id, nth: engine/agents/graph.py's `_dispatched`)."""
    name, args = str(call["name"]), dict(call["args"])
    properties = _properties(run, name)
    fields = {key: _field(properties.get(key), value) for key, value in args.items()}
    return {
        "kind": KIND,
        "gate": gate_name(run.label, run.call.index, name, int(call.get("nth") or 1)),
        "step": run.label,
        "index": run.call.index,
        "flow": run.call.flow,
        "message": f"agent '{run.plan.block.block}' asks to call {name}({_shown(args)})",
        "fields": fields,
        "tool": name,
        "args": args,
        "call_id": call["id"],
        "allowed": list(allowed),
        "approvers": [],
        "timeout": None,
        "on_reject": None,
        "on_timeout": None,
    }


def ask(run: AgentRun, call: Mapping[str, Any], allowed: Sequence[str]) -> Decided:
    """Wait for a person's decision on `call` (the first time: the run waits here), and read it."""
    asked = request(run, call, allowed)
    decision = Decision.from_payload(interrupt(asked))
    values = check_decision(
        asked, decision.decision, decision.values, decision.actor, timed_out=decision.timed_out
    )
    rejected = decision.decision == REJECT
    return Decided({} if rejected else values, rejected, decision.actor, decision.reason)


def _properties(run: AgentRun, tool: str) -> Mapping[str, Any]:
    """The JSON Schema properties of `tool`'s arguments, as the model is offered them."""
    for offered in run.offered:
        function = offered.get("function") or {}
        if function.get("name") == tool:
            properties = (function.get("parameters") or {}).get("properties")
            return properties if isinstance(properties, Mapping) else {}
    return {}


def _field(schema: Any, value: Any) -> JsonDict:
    """An argument as a gate field: its declared JSON type (else any), its description, and the
    model's value as the default."""
    field: JsonDict = {"type": "any", "default": value}
    if isinstance(schema, Mapping):
        if schema.get("type") in JSON_TYPES:
            field["type"] = schema["type"]
        if isinstance(schema.get("description"), str):
            field["description"] = schema["description"]
    return field


def _shown(args: Mapping[str, Any]) -> str:
    text = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False, default=str)}" for key, value in args.items()
    )
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"
