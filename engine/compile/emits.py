"""`emit:`: custom events a step publishes when it has finished, as LangGraph's stream writer does.

Each `{event, data}` is rendered right after the step's `step_finished` event, in the step's
template scope with its outputs in it: `context` as the step leaves it (its outputs merged in,
after `outputs:` renames, for `uses` and `flow` steps), `steps.<id>.outputs` of the step itself,
the flow's `inputs` and the enclosing items. The event goes to the custom stream as
`{"type": event, "step": label, "data": {...}, "custom": true}`; the runtime numbers and stores it
like any event (engine/runtime/events.py). A value that fails to render does not fail the finished
step: a `warning` event (code `emit_failed`) says why. Schema: docs/runtime.md ("Events").

The events are raised by wrapping the stream writer a node gets (as engine/compile/position.py
does), so constructs need not know about `emit:`: the wrapper watches for the `step_finished` of
a step that declares events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from engine.compile.state import record
from engine.core.events import CUSTOM_MARK
from engine.core.values import JsonDict
from engine.nodes.events import STEP_FINISHED, warning
from engine.nodes.scope import Frame, make_scope
from engine.spec import StepSpec
from engine.spec.flow import EmitSpec
from engine.templates.render import TemplateError, render


@dataclass(frozen=True)
class EmitPlan:
    """The events of one step, and how its outputs reach the context."""

    step: str  # the id as written in the flow
    events: tuple[EmitSpec, ...]
    frames: tuple[Frame, ...]
    renames: Mapping[str, str] | None  # None: the step's outputs do not go to the context


class Emits:
    """The `emit:` plans of one flow graph's steps by label (shared with its map body graphs)."""

    def __init__(self) -> None:
        self.plans: dict[str, EmitPlan] = {}

    def add(self, label: str, step: StepSpec, frames: tuple[Frame, ...]) -> None:
        if step.emits:
            renames = (
                {name: step.output_key(name) for name in step.outputs}
                if step.action in ("uses", "flow")
                else None
            )
            self.plans[label] = EmitPlan(step.id, tuple(step.emits), frames, renames)

    def runtime(self, state: Mapping[str, Any], runtime: Runtime[Any]) -> Runtime[Any]:
        """`runtime` whose writer follows each `step_finished` of a step with `emit:` by its events."""
        if not self.plans:
            return runtime
        writer: Callable[[Any], None] = runtime.stream_writer
        # what the steps finished in this node have written so far (a step and its inline follower)
        context = dict(state.get("context") or {})
        results = list(state.get("results") or [])
        plans = self.plans

        def write(chunk: Any) -> None:
            writer(chunk)
            if not isinstance(chunk, dict) or chunk.get("type") != STEP_FINISHED:
                return
            plan = plans.get(str(chunk.get("step")))
            if plan is None:
                return
            data = chunk.get("data") or {}
            raw = data.get("outputs")
            outputs: JsonDict = raw if isinstance(raw, dict) else {}
            if plan.renames is not None:
                context.update(
                    {plan.renames.get(key, key): value for key, value in outputs.items()}
                )
            results.append(record(plan.step, None, outputs))
            scope = make_scope({**state, "context": context, "results": results}, plan.frames)
            for spec in plan.events:
                try:
                    rendered = render(spec.data, scope)
                except TemplateError as exc:
                    warning(
                        writer,
                        str(chunk["step"]),
                        "emit_failed",
                        f"event '{spec.event}' was not emitted: {exc}",
                        event=spec.event,
                    )
                    continue
                writer(
                    {"type": spec.event, "step": chunk["step"], "data": rendered, CUSTOM_MARK: True}
                )

        return runtime.override(stream_writer=write)
