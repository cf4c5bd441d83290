"""What templates see, and how a block's inputs are bound.

Template scope: `inputs`, `context`, `steps.<id>.outputs` (built from `results` only when a
template reads it) and, inside map/foreach bodies, each enclosing item under its `as` name.

A block input is bound, in this order, from: its `with:` binding; the item of an enclosing
map/foreach whose `as` name is the input's name; the context key of the same name; the flow
input of the same name; the block's default. Then it is checked against its declared type.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from engine.compile.errors import Problem
from engine.spec import TypeSpec
from engine.templates import TemplateError, render
from engine.typecheck import TypeMismatch, conform

FOREACH_ITEMS = "{}.items"  # loops keys of a foreach: the list, and the current position
FOREACH_INDEX = "{}.i"
MAP_ITEM = "{}.item"  # loops keys inside one map item's body
MAP_INDEX = "{}.index"


@dataclass(frozen=True)
class Frame:
    """An enclosing map or foreach: where its current item lives in `loops`."""

    kind: str  # foreach | map
    step: str
    name: str  # the `as` name

    def item(self, loops: Mapping[str, Any]) -> Any:
        if self.kind == "foreach":
            return loops[FOREACH_ITEMS.format(self.step)][loops[FOREACH_INDEX.format(self.step)]]
        return loops[MAP_ITEM.format(self.step)]

    def index(self, loops: Mapping[str, Any]) -> int:
        key = FOREACH_INDEX if self.kind == "foreach" else MAP_INDEX
        return int(loops[key.format(self.step)])


class StepsView(Mapping[str, Any]):
    """`steps.<id>.outputs` over the `results` records; indexed on first use (most recent wins)."""

    def __init__(self, results: list[dict[str, Any]]) -> None:
        self._results = results
        self._index: dict[str, dict[str, Any]] | None = None

    def _built(self) -> dict[str, dict[str, Any]]:
        if self._index is None:
            self._index = {r["step"]: {"outputs": r["outputs"], "status": r["status"]} for r in self._results}
        return self._index

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def make_scope(state: Mapping[str, Any], frames: tuple[Frame, ...], extra: Mapping[str, Any] | None = None
               ) -> dict[str, Any]:
    """The template scope of a step running in `state` inside `frames` (outermost first)."""
    scope: dict[str, Any] = {}
    loops = state.get("loops") or {}
    for frame in frames:
        scope[frame.name] = frame.item(loops)
    if extra:
        scope.update(extra)
    scope["inputs"] = state.get("inputs") or {}
    scope["context"] = state.get("context") or {}
    scope["steps"] = StepsView(state.get("results") or [])
    return scope


def item_index(state: Mapping[str, Any], frames: tuple[Frame, ...]) -> int | None:
    """Position of the innermost enclosing item, for events and messages."""
    if not frames:
        return None
    return frames[-1].index(state.get("loops") or {})


class Binder:
    """Binds the declared inputs of one block at one step."""

    def __init__(self, declared: Mapping[str, TypeSpec], bindings: Mapping[str, Any],
                 frames: tuple[Frame, ...]) -> None:
        self.declared = dict(declared)
        self.bindings = dict(bindings)
        self.items = {frame.name for frame in frames}

    def bind(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        """The block's inputs, type-checked; Problem names the input that is wrong."""
        context = scope["context"]
        flow_inputs = scope["inputs"]
        values: dict[str, Any] = {}
        for name, spec in self.declared.items():
            if name in self.bindings:
                try:
                    value = render(self.bindings[name], scope)
                except TemplateError as exc:
                    raise Problem(f"input '{name}': {exc}") from None
            elif name in self.items:
                value = scope[name]
            elif name in context:
                value = context[name]
            elif name in flow_inputs:
                value = flow_inputs[name]
            elif spec.has_default:
                value = copy.deepcopy(spec.default)
            else:
                raise Problem(f"input '{name}' is not bound: no `with:` binding, no context key or flow input "
                              f"named '{name}', and no default")
            try:
                values[name] = plain(conform(value, spec, name), name)
            except TypeMismatch as exc:
                raise Problem(f"input {exc}") from None
            except Problem as exc:
                raise Problem(f"input {exc}") from None
        return values


def plain(value: Any, name: str) -> Any:
    """`value` as JSON data (the state is checkpointed and events are JSON): tuples become lists,
    str subclasses str; anything else that JSON cannot hold is a Problem naming `name`."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, list | tuple):
        return [plain(item, f"{name}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise Problem(f"'{name}' has a key that is not text: {key!r}")
            result[str(key)] = plain(item, f"{name}.{key}")
        return result
    if isinstance(value, str):
        return str(value)  # e.g. markupsafe.Markup from a template filter
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):
        return int(value) if isinstance(value, int) else float(value)  # enum members and the like
    raise Problem(f"'{name}' is not JSON data (a {type(value).__name__})")


def check_outputs(declared: Mapping[str, TypeSpec], produced: Any) -> dict[str, Any]:
    """A block's outputs checked against its declaration: all present (or defaulted), none unknown."""
    if not isinstance(produced, dict):
        raise Problem(f"outputs must be an object with keys {', '.join(declared)}, got {type(produced).__name__}")
    unknown = [key for key in produced if key not in declared]
    if unknown:
        raise Problem(f"unknown output{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)} "
                      f"(the block declares {', '.join(repr(k) for k in declared) or 'none'})")
    result: dict[str, Any] = {}
    for name, spec in declared.items():
        if name in produced:
            value = produced[name]
        elif spec.has_default:
            value = copy.deepcopy(spec.default)
        else:
            raise Problem(f"output '{name}' is missing")
        try:
            result[name] = plain(conform(value, spec, name), name)
        except TypeMismatch as exc:
            raise Problem(f"output {exc}") from None
        except Problem as exc:
            raise Problem(f"output {exc}") from None
    return result
