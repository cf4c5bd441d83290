"""Where each step of a pinned flow sits: which loop, foreach or map body holds it, which steps run
subflows, which maps run one block per item. Step events carry only a label (`draft`, or
`headline.summarize` inside the subflow step `headline`), so the span tree asks here whose child a
step's span is. Computed once per definition; no OpenTelemetry here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.definitions.pinned import Bundle
from engine.spec.walk import walk_steps


@dataclass(frozen=True)
class FlowLayout:
    """One flow's steps: `container[id]` is the loop/foreach/map step whose body holds step `id`;
    `subflow[id]` the flow a `flow:` step runs; `item_maps` the maps whose items run under the
    map's own label (`map: {uses: ...}`)."""

    container: dict[str, str] = field(default_factory=dict)
    subflow: dict[str, str] = field(default_factory=dict)
    item_maps: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Layout:
    """The layout of a run's flow (`root`) and of every flow it runs as a subflow, by name. `steps` is
    where engine/telemetry/spans.py keeps what it works out once per step of the definition (a step's
    label names one step of it, and one only, outside the items of a map)."""

    root: FlowLayout
    flows: dict[str, FlowLayout]
    steps: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def of(self, flow: str | None) -> FlowLayout:
        """The layout of subflow `flow` (the root flow's for None or a flow this bundle does not hold)."""
        if flow is None:
            return self.root
        return self.flows.get(flow, EMPTY)


EMPTY = FlowLayout()


def layout(bundle: Bundle) -> Layout:
    flows: dict[str, FlowLayout] = {}
    pending = list(bundle.flows.items())
    while pending:
        name, sub = pending.pop()
        if name not in flows:
            flows[name] = flow_layout(sub)
            pending.extend(sub.flows.items())
    return Layout(flow_layout(bundle), flows)


def flow_layout(bundle: Bundle) -> FlowLayout:
    container: dict[str, str] = {}
    subflow: dict[str, str] = {}
    item_maps: set[str] = set()
    for walked in walk_steps(bundle.flow.steps):
        step = walked.step
        owner = walked.list.owner
        if owner is not None:
            container[step.id] = owner.id
        if step.flow is not None:
            subflow[step.id] = step.flow
        if step.map is not None and step.map.uses is not None:
            item_maps.add(step.id)
    return FlowLayout(container, subflow, frozenset(item_maps))
