"""What a semantic diff found, as data: the JSON form of `blockyard diff` is these, as dicts.

Every text here is one line a reviewer reads (`loop.max_iterations: 3 → 5`); the renderers
(engine/review/render.py) only arrange them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.core.diagnostics import Diagnostic
from engine.core.values import JsonDict

ADDED, REMOVED, CHANGED, RENAMED, AFFECTED = "added", "removed", "changed", "renamed", "affected"
SHORT = 60  # characters of a value shown in a change line


def short(value: Any) -> str:
    """A value in one short line: JSON, cut at SHORT characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def field_changes(old: Any, new: Any, path: str = "") -> list[str]:
    """The differences of two JSON values, one line per changed leaf: `a.b: 1 → 2`, `a.c added: 3`."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in [*new, *(key for key in old if key not in new)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                found.append(f"{where} added: {short(new[key])}")
            elif key not in new:
                found.append(f"{where} removed (was {short(old[key])})")
            else:
                found.extend(field_changes(old[key], new[key], where))
        return found
    return [f"{path or 'value'}: {short(old)} → {short(new)}"]


@dataclass
class StepChange:
    id: str
    status: str  # added | removed | changed
    details: list[str] = field(default_factory=list)

    def as_dict(self) -> JsonDict:
        return {"id": self.id, "status": self.status, "details": self.details}


@dataclass
class ContractChange:
    text: str
    breaking: bool
    steps: list[str] = field(default_factory=list)  # `flow.step` uses it breaks

    def as_dict(self) -> JsonDict:
        return {"change": self.text, "breaking": self.breaking, "breaks": self.steps}


@dataclass
class BlockDiff:
    name: str
    status: str  # added | removed | changed | renamed
    file: str | None
    old_file: str | None = None
    old_name: str | None = None
    versions: tuple[int | None, int | None] = (None, None)
    contract: list[ContractChange] = field(default_factory=list)
    prompt: list[str] = field(default_factory=list)
    prompt_diff: list[str] = field(default_factory=list)  # unified diff of the prompt texts
    model: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    used_by: list[str] = field(default_factory=list)  # flows of the head that use it

    @property
    def breaking(self) -> bool:
        return any(change.breaking for change in self.contract)

    def as_dict(self) -> JsonDict:
        return {
            "name": self.name,
            "status": self.status,
            "file": self.file,
            "old_file": self.old_file,
            "old_name": self.old_name,
            "version": {"base": self.versions[0], "head": self.versions[1]},
            "breaking": self.breaking,
            "contract": [c.as_dict() for c in self.contract],
            "prompt": self.prompt,
            "prompt_diff": self.prompt_diff,
            "model": self.model,
            "other": self.other,
            "used_by": self.used_by,
        }


@dataclass
class FlowDiff:
    name: str
    status: str  # added | removed | changed | renamed | affected (only through its blocks, subflows, config)
    file: str | None
    old_file: str | None = None
    old_name: str | None = None
    versions: tuple[int | None, int | None] = (None, None)
    steps: list[StepChange] = field(default_factory=list)
    edges_added: list[str] = field(default_factory=list)
    edges_removed: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)  # inputs, outputs, schedule, memory, ...
    through: list[str] = field(default_factory=list)  # changed blocks and subflows it uses
    graph: str | None = None  # the Mermaid drawing (markdown only), None when it cannot be drawn
    graph_note: str | None = None  # why there is no drawing

    def as_dict(self) -> JsonDict:
        return {
            "name": self.name,
            "status": self.status,
            "file": self.file,
            "old_file": self.old_file,
            "old_name": self.old_name,
            "version": {"base": self.versions[0], "head": self.versions[1]},
            "steps": [s.as_dict() for s in self.steps],
            "edges": {"added": self.edges_added, "removed": self.edges_removed},
            "settings": self.settings,
            "through": self.through,
        }


@dataclass
class PausedRun:
    run_id: str
    flow: str
    step: str | None
    status: str  # the gate's step: removed | changed | unchanged
    detail: str

    def as_dict(self) -> JsonDict:
        return {
            "run": self.run_id,
            "flow": self.flow,
            "step": self.step,
            "impact": self.status,
            "detail": self.detail,
        }


@dataclass
class ScheduleChange:
    flow: str
    before: str | None  # next fire time (ISO) under the base, None: not scheduled
    after: str | None
    detail: str

    def as_dict(self) -> JsonDict:
        return {
            "flow": self.flow,
            "next_fire": {"base": self.before, "head": self.after},
            "detail": self.detail,
        }


@dataclass
class ThreadChange:
    thread: str
    flow: str
    detail: str

    def as_dict(self) -> JsonDict:
        return {"thread": self.thread, "flow": self.flow, "detail": self.detail}


@dataclass
class InFlight:
    source: str  # the state database's path, or the server's URL
    runs: list[PausedRun] = field(default_factory=list)
    schedules: list[ScheduleChange] = field(default_factory=list)
    threads: list[ThreadChange] = field(default_factory=list)

    def as_dict(self) -> JsonDict:
        return {
            "source": self.source,
            "paused_runs": [r.as_dict() for r in self.runs],
            "schedules": [s.as_dict() for s in self.schedules],
            "threads": [t.as_dict() for t in self.threads],
        }


@dataclass
class YardDiff:
    base: str
    head: str
    flows: list[FlowDiff] = field(default_factory=list)
    blocks: list[BlockDiff] = field(default_factory=list)
    config: list[str] = field(default_factory=list)
    # the version policy's findings (head files)
    problems: list[Diagnostic] = field(default_factory=list)
    inflight: InFlight | None = None

    @property
    def changed(self) -> bool:
        return bool(self.flows or self.blocks or self.config)

    def flow(self, name: str) -> FlowDiff | None:
        return next((f for f in self.flows if f.name == name), None)

    def block(self, name: str) -> BlockDiff | None:
        return next((b for b in self.blocks if b.name == name), None)

    def as_dict(self) -> JsonDict:
        found: JsonDict = {
            "base": self.base,
            "head": self.head,
            "changed": self.changed,
            "flows": [f.as_dict() for f in self.flows],
            "blocks": [b.as_dict() for b in self.blocks],
            "config": self.config,
            "problems": [d.as_dict() for d in self.problems],
        }
        if self.inflight is not None:
            found["in_flight"] = self.inflight.as_dict()
        return found
