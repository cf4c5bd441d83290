"""How a step's outputs land in the context: replaced, or accumulated (`reduce: append | merge`).

An accumulated key is computed in the node from the value the node read (`old + new`), never by a
channel reducer adding to whatever is there: a node's update is committed only when it succeeds,
and a node that runs again — retried after a failure, or re-run from its last checkpoint after a
crash — reads the same old value again, so an output is never added twice.

Map items run on their own copy of the context. What a step accumulates inside an item is also
logged in `loops["<map>.d"]` (the innermost enclosing map), and the map's join adds each item's
log to the shared context in item order, so `reduce` gathers across items as it does across
passes of a loop (docs/flows.md, "Accumulating outputs").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.core.values import JsonDict
from engine.nodes.errors import Problem
from engine.nodes.scope import Frame
from engine.spec import StepSpec

LOG = (
    "{}.d"  # loops key: what the items of map <id> accumulated, [[key, mode, value], ...] in order
)


def log_key(frames: tuple[Frame, ...]) -> str | None:
    """The log of the innermost map around a step, or None outside maps."""
    for frame in reversed(frames):
        if frame.kind == "map":
            return LOG.format(frame.step)
    return None


def combine(mode: str, old: Any, new: Any, key: str) -> Any:
    """`new` added to `old` (missing: empty) by `mode`; Problem when the values do not fit it."""
    if mode == "append":
        if not isinstance(new, list):
            raise Problem(
                f"output for context key '{key}' has `reduce: append` and needs a list, "
                f"got {type(new).__name__}"
            )
        base = old if isinstance(old, list) else []
        if old is not None and not isinstance(old, list):
            raise Problem(
                f"context key '{key}' holds {type(old).__name__}, not a list to append to"
            )
        return [*base, *new]
    if not isinstance(new, dict):
        raise Problem(
            f"output for context key '{key}' has `reduce: merge` and needs an object, "
            f"got {type(new).__name__}"
        )
    if old is not None and not isinstance(old, dict):
        raise Problem(
            f"context key '{key}' holds {type(old).__name__}, not an object to merge into"
        )
    return {**(old or {}), **new}


class Landing:
    """Where the outputs of one step go: context key and reduce mode per output name."""

    def __init__(self, step: StepSpec | None, frames: tuple[Frame, ...] = ()) -> None:
        self.keys: dict[str, str] = {}
        self.modes: dict[str, str] = {}
        if step is not None:
            for name in step.outputs:
                self.keys[name] = step.output_key(name)
                mode = step.output_reduce(name)
                if mode is not None:
                    self.modes[name] = mode
        self.log = log_key(frames) if self.modes else None

    def key(self, name: str) -> str:
        return self.keys.get(name, name)

    def update(self, outputs: Mapping[str, Any], state: Mapping[str, Any]) -> JsonDict:
        """The `context` (and, inside a map item, `loops`) update for `outputs`; Problem when an
        accumulated output is not a list (append) or an object (merge)."""
        context = state.get("context") or {}
        written: JsonDict = {}
        logged: list[list[Any]] = []
        for name, value in outputs.items():
            key = self.key(name)
            mode = self.modes.get(name)
            if mode is None:
                written[key] = value
                continue
            written[key] = combine(mode, written.get(key, context.get(key)), value, key)
            logged.append([key, mode, value])
        update: JsonDict = {"context": written}
        if self.log is not None and logged:
            loops = state.get("loops") or {}
            update["loops"] = {self.log: [*(loops.get(self.log) or []), *logged]}
        return update


def replay(context: Mapping[str, Any], entries: Iterable[list[Any]]) -> JsonDict:
    """The context keys that `entries` (a map's log, items in order) change, applied to `context`."""
    written: JsonDict = {}
    for key, mode, value in entries:
        written[key] = combine(mode, written.get(key, context.get(key)), value, key)
    return written


def empty(modes: Mapping[str, str]) -> JsonDict:
    return {key: [] if mode == "append" else {} for key, mode in modes.items()}
