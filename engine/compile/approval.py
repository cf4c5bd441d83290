"""Approval gates: `approval:` steps and `require_approval:` on any step.

A gate is a node of its own that holds nothing but LangGraph's `interrupt()`: LangGraph re-runs an
interrupted node from its first line when the run resumes, so the gate renders its message, asks,
and only after the answer arrives writes anything — the step it guards runs in the next node, once.
`approval:` steps are that node (`<id>`); `require_approval:` puts one in front of the step
(`<id>.gate`), the way a `max_visits` guard is put in front of a step.

The interrupt's value is the gate's request and the resume value is a decision
(engine/spec/decisions.py). Approve: the field values (defaults filled in) go to the context and
the run goes on — into the guarded step, or after an approval step. Reject: `on_reject` (a step,
`end`, or `fail`). A timeout whose `on_timeout` names a step goes there; the runtime turns
`on_timeout: approve|reject` into that decision before it resumes the run.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from engine.compile.builder import Built, GraphBuilder, Region
from engine.compile.state import State, record
from engine.core.values import JsonDict, text_problem
from engine.nodes.context import RunContext
from engine.nodes.events import STEP_STARTED, elapsed_ms, emit, failed, finished
from engine.nodes.scope import item_index, make_scope
from engine.spec import ApprovalSpec, StepSpec
from engine.spec.decisions import (
    REJECT,
    TIMEOUT,
    Decision,
    DecisionRefused,
    check_decision,
    fields_json,
    gate_spec,
)
from engine.spec.flow import ApprovalStep
from engine.templates.render import TemplateError, render_text

GATE = "{}.gate"


def build(builder: GraphBuilder, region: Region, step: ApprovalStep) -> Built:
    """An `approval:` step: the gate is the step; approving goes on to whatever follows it."""
    spec = step.approval
    built = Built([step.id])
    builder.add_node(
        step.id, _gate(builder, region, step, spec, lambda: built.after, own_step=True)
    )
    return built


def wrap(builder: GraphBuilder, region: Region, step: StepSpec, inner: Built) -> Built:
    """`inner` behind a `require_approval` gate: same exits, the gate as its entry."""
    spec = gate_spec(step)
    assert spec is not None
    entries = list(inner.entries)
    name = GATE.format(step.id)
    builder.add_node(name, _gate(builder, region, step, spec, lambda: entries, own_step=False))
    inner.entries = [name]
    return inner


def _gate(
    builder: GraphBuilder,
    region: Region,
    step: StepSpec,
    spec: ApprovalSpec,
    on_approve: Callable[[], list[str]],
    *,
    own_step: bool,
) -> Callable[..., Any]:
    flow = builder.flow
    label = builder.label(step.id)
    frames = region.frames
    fields = fields_json(spec.fields)
    kind = "approval" if own_step else "require_approval"

    async def node(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        # Everything before interrupt() runs again on resume: it only reads the state.
        writer = runtime.stream_writer
        index = item_index(state, frames)
        message = _message(writer, flow, label, spec, make_scope(state, frames), index)
        request = {
            "kind": kind,
            "gate": label if index is None else f"{label}[{index}]",
            "step": label,
            "index": index,
            "flow": flow,
            "message": message,
            "fields": copy.deepcopy(fields),
            "approvers": list(spec.approvers),
            "timeout": spec.timeout,
            "on_reject": spec.on_reject,
            "on_timeout": spec.on_timeout if spec.timeout is not None else None,
        }
        answer = interrupt(request)

        started = time.monotonic()
        if own_step:
            emit(writer, STEP_STARTED, label, {"block": None, "kind": "approval"}, index)
        try:
            decision = Decision.from_payload(answer)
            values = check_decision(
                request,
                decision.decision,
                decision.values,
                decision.actor,
                timed_out=decision.timed_out,
            )
        except DecisionRefused as exc:
            raise failed(writer, flow, label, str(exc), started=started, index=index) from None
        update: dict[str, Any] = {"context": values} if values else {}
        if own_step:
            _record_step(writer, step.id, label, decision, values, update, started, index)
        if decision.approved:
            return Command(update=update, goto=on_approve())
        if decision.decision == TIMEOUT:
            return Command(update=update, goto=region.resolve(spec.on_timeout))
        if spec.on_reject == "fail":
            who = f" by {decision.actor}" if decision.actor else ""
            why = f": {decision.reason}" if decision.reason else ""
            raise failed(writer, flow, label, f"rejected{who}{why}", started=started, index=index)
        return Command(update=update, goto=region.resolve(spec.on_reject))

    return node


def _message(writer: Any, flow: str, label: str, spec: ApprovalSpec, scope: Any, index: Any) -> str:
    """The gate's message, rendered; the step fails (its error named) when it does not render or is
    no text the database stores as UTF-8."""
    try:
        message = render_text(spec.message, scope)
    except TemplateError as exc:
        raise failed(
            writer, flow, label, f"approval message: {exc}", started=time.monotonic(), index=index
        ) from None
    problem = text_problem(message)  # the gate's request is written to the database as UTF-8
    if problem is not None:
        raise failed(
            writer,
            flow,
            label,
            f"approval message: the rendered text {problem}",
            started=time.monotonic(),
            index=index,
        )
    return message


def _record_step(
    writer: Any,
    step_id: str,
    label: str,
    decision: Decision,
    values: JsonDict,
    update: dict[str, Any],
    started: float,
    index: Any,
) -> None:
    """A gate that is a step of its own: its step_finished event, and its result in `update`."""
    finished(
        writer,
        label,
        values,
        duration_ms=elapsed_ms(started),
        index=index,
        kind="approval",
        decision=decision.decision,
        actor=decision.actor,
        reason=decision.reason,
        timed_out=decision.timed_out,
    )
    status = (
        "ok" if decision.approved else "rejected" if decision.decision == REJECT else "timed_out"
    )
    update["results"] = [
        record(step_id, None, values, status, decision=decision.decision, actor=decision.actor)
    ]
