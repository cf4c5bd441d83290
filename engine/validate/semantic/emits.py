"""`emit:` of steps: custom event names, and the templates of their data (docs/flows.md, "Custom events").

An event's name must not be one of the engine's own event types (BY425): a client could not tell
a step's `progress` from the engine's `step_finished` if both could be called `step_finished`.
The data is rendered after the step finishes, so its templates see what they see before the step
plus the step's own writes: the context keys it writes and `steps.<id>.outputs` of the step.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.core.events import RESERVED_EVENT_NAMES
from engine.definitions.load import JsonPath
from engine.spec.flow import EmitSpec
from engine.validate.semantic.dataflow import Dataflow
from engine.validate.semantic.facts import Facts
from engine.validate.semantic.index import FlowIndex, StepNode
from engine.validate.semantic.templates import bindings

EmitPlace = tuple[str, JsonPath, bool, tuple[Facts | None, Facts] | None, tuple[str, ...]]


def emit_places(
    node: StepNode, before: tuple[Facts | None, Facts] | None, flow: Dataflow | None
) -> Iterator[EmitPlace]:
    """The templates of the step's `emit:` data, with the facts that hold once the step has finished."""
    after = _after(node, before, flow)
    for where, spec in _emits(node):
        for source, at in bindings(spec.data, (*where, "data")):
            yield source, at, False, after, node.region.items


def check_emits(index: FlowIndex) -> None:
    """BY425: a custom event named like one of the engine's events."""
    for node in index.walk():
        for where, spec in _emits(node):
            if spec.event in RESERVED_EVENT_NAMES:
                index.report(
                    (*where, "event"),
                    "BY425",
                    f"step '{node.id}': event name '{spec.event}' is one of the engine's own event types "
                    f"({', '.join(sorted(RESERVED_EVENT_NAMES))}); name the event for what it reports, "
                    "e.g. 'progress'",
                )


def _emits(node: StepNode) -> Iterator[tuple[JsonPath, EmitSpec]]:
    emit = node.spec.emit
    if emit is None:
        return
    if isinstance(emit, list):
        for position, spec in enumerate(emit):
            yield node.at("emit", position), spec
    else:
        yield node.at("emit"), emit


def _after(
    node: StepNode, before: tuple[Facts | None, Facts] | None, flow: Dataflow | None
) -> tuple[Facts | None, Facts] | None:
    if before is None or flow is None:
        return before
    must, may = before
    if must is None:
        return before  # unknown facts (an unreachable step, a broken flow) prove nothing
    return must | flow.gen(node), may | flow.gen_may(node) | flow.gen(node)
