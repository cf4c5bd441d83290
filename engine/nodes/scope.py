"""What templates see, and how a block's inputs are bound.

Template scope: `inputs`, `context`, `steps.<id>.outputs` (built from `results` only when a
template reads it) and, inside map/foreach bodies, each enclosing item under its `as` name.

A block input is bound, in this order, from: its `with:` binding; the item of an enclosing
map/foreach whose `as` name is the input's name; the context key of the same name; the flow
input of the same name; the block's default. Then it is checked against its declared type.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from engine.core.values import JsonDict, int_problem, text_problem
from engine.nodes.errors import Problem
from engine.spec import TypeSpec
from engine.spec.typecheck import TypeMismatch, conform
from engine.templates.render import (
    TemplateError,
    evaluate,
    is_template,
    render,
    render_text,
    single_expression,
)

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

    def __init__(self, results: list[JsonDict]) -> None:
        self._results = results
        self._index: dict[str, JsonDict] | None = None

    def _built(self) -> dict[str, JsonDict]:
        if self._index is None:
            self._index = {
                r["step"]: {"outputs": r["outputs"], "status": r["status"]} for r in self._results
            }
        return self._index

    def __getitem__(self, key: str) -> JsonDict:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def make_scope(
    state: Mapping[str, Any], frames: tuple[Frame, ...], extra: Mapping[str, Any] | None = None
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
    """Binds the declared inputs of one block at one step. Where each input comes from and how
    its type is checked are decided here, once, at compile time."""

    def __init__(
        self,
        declared: Mapping[str, TypeSpec],
        bindings: Mapping[str, Any],
        frames: tuple[Frame, ...],
    ) -> None:
        self.declared = dict(declared)
        self.bindings = dict(bindings)
        self.items = {frame.name for frame in frames}
        self._plan = [
            (
                name,
                spec,
                _binding(self.bindings[name]) if name in self.bindings else None,
                name in self.items,
                checker(spec),
            )
            for name, spec in self.declared.items()
        ]

    def bind(self, scope: Mapping[str, Any]) -> JsonDict:
        """The block's inputs, type-checked; Problem names the input that is wrong."""
        context = scope["context"]
        flow_inputs = scope["inputs"]
        values: JsonDict = {}
        for name, spec, binding, is_item, check in self._plan:
            if binding is not None:
                try:
                    value = binding(scope)
                except TemplateError as exc:
                    raise Problem(f"input '{name}': {exc}") from None
            elif is_item:
                value = scope[name]
            elif name in context:
                value = context[name]
            elif name in flow_inputs:
                value = flow_inputs[name]
            elif spec.has_default:
                value = copy.deepcopy(spec.default)
            else:
                raise Problem(
                    f"input '{name}' is not bound: no `with:` binding, no context key or flow input "
                    f"named '{name}', and no default"
                )
            values[name] = check(value, name, "input")
        return values


def _binding(value: Any) -> Callable[[Mapping[str, Any]], Any]:
    """`render(value, scope)` with what does not depend on the scope worked out once: a lone
    `{{ expr }}` is evaluated directly, plain text is returned as it is."""
    if isinstance(value, str):
        if not is_template(value):
            return lambda _scope: value
        expression = single_expression(value)
        if expression is not None:
            return lambda scope: evaluate(expression, scope)
    return lambda scope: render(value, scope)


Check = Callable[[Any, str, str], Any]
_EXACT: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def checker(spec: TypeSpec) -> Check:
    """`value` conformed to `spec` and made JSON-plain (Problem naming `what` 'name' when it does
    not fit). Scalars of exactly the declared type are returned as they are: conform and plain
    would return them unchanged."""
    exact = _EXACT.get(spec.type) if spec.enum is None else None

    def slow(value: Any, name: str, what: str) -> Any:
        try:
            return plain(conform(value, spec, name), name)
        except TypeMismatch as exc:
            raise Problem(f"{what} {exc}") from None
        except Problem as exc:
            raise Problem(f"{what} {exc}") from None

    if exact is None:
        return slow

    def check(value: Any, name: str, what: str) -> Any:
        kind = type(value)
        if kind not in exact:
            return slow(value, name, what)
        if kind is str:
            return value if value.isascii() else slow(value, name, what)
        if kind is int:
            return value if -_INT_FAST < value < _INT_FAST else slow(value, name, what)
        return value

    return check


_INT_FAST = 2**62  # ints this small are in the 64-bit domain without a closer look


def plain(value: Any, name: str) -> Any:
    """`value` as JSON data in the engine's value domain (engine/core/values.py: the state is
    checkpointed with msgpack and events are JSON): tuples become lists, str subclasses str;
    anything else that JSON cannot hold, an integer beyond 64 bits or text with a lone surrogate
    is a Problem naming `name`."""
    if value is None or type(value) in (float, bool):
        return value
    if type(value) is int:
        problem = int_problem(value)
        if problem is not None:
            raise Problem(f"'{name}' {problem}")
        return value
    if type(value) is str:
        problem = text_problem(value)
        if problem is not None:
            raise Problem(f"'{_printable(name)}' {problem}")
        return value
    if isinstance(value, list | tuple):
        return [plain(item, f"{name}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        result: JsonDict = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise Problem(f"'{name}' has a key that is not text: {key!r}")
            problem = text_problem(key)
            if problem is not None:
                raise Problem(f"'{_printable(name)}' has a key that {problem}")
            result[str(key)] = plain(item, f"{name}.{key}")
        return result
    if isinstance(value, str):
        return plain(str(value), name)  # e.g. markupsafe.Markup from a template filter
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):
        # enum members and the like
        return plain(int(value), name) if isinstance(value, int) else float(value)
    raise Problem(f"'{name}' is not JSON data (a {type(value).__name__})")


def _printable(name: str) -> str:
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def check_outputs(declared: Mapping[str, TypeSpec], produced: Any) -> JsonDict:
    """A block's outputs checked against its declaration: all present (or defaulted), none unknown."""
    if not isinstance(produced, dict):
        raise Problem(
            f"outputs must be an object with keys {', '.join(declared)}, got {type(produced).__name__}"
        )
    unknown = [key for key in produced if key not in declared]
    if unknown:
        raise Problem(
            f"unknown output{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)} "
            f"(the block declares {', '.join(repr(k) for k in declared) or 'none'})"
        )
    result: JsonDict = {}
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


class OutputCheck:
    """`check_outputs` for one block, prepared once: the usual case (every declared output
    produced, nothing else) takes one pass; anything else gets the full check and its messages."""

    def __init__(self, declared: Mapping[str, TypeSpec]) -> None:
        self.declared = dict(declared)
        self._checks = [(name, checker(spec)) for name, spec in self.declared.items()]

    def __call__(self, produced: Any) -> JsonDict:
        if type(produced) is not dict or len(produced) != len(self._checks):
            return check_outputs(self.declared, produced)
        result: JsonDict = {}
        for name, check in self._checks:
            if name not in produced:
                return check_outputs(self.declared, produced)
            result[name] = check(produced[name], name, "output")
        return result


def render_prompt(where: str, source: str | None, scope: Mapping[str, Any]) -> str | None:
    """A prompt template rendered for a model (None when the block has none); a Problem naming
    `where` when it does not render or renders text no provider can send."""
    if source is None:
        return None
    try:
        text = render_text(source, scope)
    except TemplateError as exc:
        raise Problem(f"{where}: {exc}") from None
    problem = text_problem(text)  # e.g. a "\udcff" escape in a template: no provider can send it
    if problem is not None:
        raise Problem(f"{where}: the rendered text {problem}")
    return text
