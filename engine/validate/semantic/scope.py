"""Step-level templates: `with:` values, items, router values and rules, until, approval messages.

They see `inputs.<flow input>`, `context.<key written upstream>`, `steps.<id>.outputs.<name>` of
a step that has finished on every path, and the `as` items of the bodies they sit in.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.core.diagnostics import did_you_mean
from engine.definitions.load import JsonPath
from engine.spec import ApprovalSpec
from engine.spec.flow import ExprRoute
from engine.validate.semantic.dataflow import Dataflow, key_fact, keys_of, step_fact
from engine.validate.semantic.emits import emit_places
from engine.validate.semantic.facts import NOTHING, Facts
from engine.validate.semantic.index import FlowIndex, StepNode, quote_list
from engine.validate.semantic.references import step_outputs
from engine.validate.semantic.templates import Problem, bindings, scan

ROOTS = ("inputs", "context", "steps")
# what router values and rules see besides (docs/flows.md, "Router"): the run's conversation
CONVERSATION = ("last_message", "messages")
# `context.get('x', 0)` calls the mapping's method (Jinja tries attributes before keys): not a key
MAPPING_METHODS = frozenset({"get", "keys", "items", "values"})


class StepScope:
    """Resolves the variables of templates in one place of a step."""

    def __init__(
        self,
        index: FlowIndex,
        node: StepNode,
        facts: tuple[Facts | None, Facts] | None,
        items: tuple[str, ...],
        flow: Dataflow | None,
        names: tuple[str, ...] = (),
    ) -> None:
        self.index = index
        self.node = node
        self.must, self.may = facts if facts is not None else (None, NOTHING)
        self.items = items
        self.flow = flow
        self.names = names  # other roots this place sees (routers: the conversation)

    def __call__(self, path: tuple[str, ...], guarded: bool) -> Problem | None:
        root = path[0]
        if (
            root in self.items
            or root in self.names
            or (len(path) > 1 and path[1] in MAPPING_METHODS)
        ):
            return None
        if root in CONVERSATION:
            return Problem(
                "BY401",
                f"'{root}' is seen only by a router's `value:` and rules (the run's "
                "conversation); elsewhere bind the message as a flow input (inputs.message)",
            )
        if root == "inputs":
            return self._input(path)
        if root == "context":
            return None if len(path) == 1 or guarded else self._context(path[1])
        if root == "steps":
            return None if len(path) == 1 else self._step(path, guarded)
        names = [*ROOTS, *self.names, *self.items]
        extra = (
            f", and the item{'s' if len(self.items) > 1 else ''} {quote_list(self.items)}"
            if self.items
            else ""
        )
        seen = f", steps, {', '.join(self.names)}" if self.names else " and steps"
        return Problem(
            "BY401",
            f"unknown variable '{root}' (step templates see inputs, context{seen}"
            f"{extra}){did_you_mean(root, names)}",
        )

    def _input(self, path: tuple[str, ...]) -> Problem | None:
        if len(path) == 1:
            return None
        flow = self.index.definition.spec
        name = path[1]
        if name in flow.inputs:
            return None
        declared = (
            f"its inputs are {quote_list(flow.inputs)}" if flow.inputs else "it declares no inputs"
        )
        return Problem(
            "BY402",
            f"unknown flow input 'inputs.{name}': flow '{flow.flow}' has no input '{name}' "
            f"({declared}){did_you_mean(name, flow.inputs)}",
        )

    def _context(self, key: str) -> Problem | None:
        if self.must is None or key_fact(key) in self.must:
            return None  # unknown facts (an unreachable step or a broken flow) prove nothing
        assert self.flow is not None
        if key in self.flow.writes(self.node) and self.flow.writers.get(key) in (None, self.node):
            return Problem(
                "BY404",
                f"context key '{key}' is written by this step itself, so it does not exist yet "
                "when this template is rendered",
            )
        explained = self.flow.explain(key, self.may, "this step")
        if explained is not None:
            guard = (
                f"; write it on every path, or read it as context.{key} | default(...)"
                if key_fact(key) in self.may
                else ""
            )
            return Problem("BY404", f"{explained}{guard}")
        flow = self.index.definition.spec
        if key in flow.inputs:
            return Problem(
                "BY404",
                f"no step writes context key '{key}'; '{key}' is a flow input: use inputs.{key}",
            )
        known = keys_of(self.must)
        return Problem("BY404", f"no step writes context key '{key}'{did_you_mean(key, known)}")

    def _step(self, path: tuple[str, ...], guarded: bool) -> Problem | None:
        name = path[1]
        target = self.index.by_id.get(name)
        if target is None:
            return Problem(
                "BY403", f"unknown step 'steps.{name}'{did_you_mean(name, self.index.by_id)}"
            )
        if not guarded and self.must is not None and step_fact(name) not in self.must:
            if target is self.node:
                return Problem("BY403", f"a step cannot read its own outputs (steps.{name})")
            when = "on every path before" if step_fact(name) in self.may else "before"
            return Problem(
                "BY403",
                f"step '{name}' does not finish {when} this step, so steps.{name} may "
                "not exist yet",
            )
        if len(path) >= 3 and path[2] != "outputs":
            return Problem(
                "BY403",
                f"steps.{name} has only `outputs` (write steps.{name}.outputs.<name>), "
                f"not '{path[2]}'",
            )
        if len(path) >= 4:
            produced = step_outputs(target)
            if produced is not None and path[3] not in produced:
                listed = (
                    f"its outputs are {quote_list(produced)}" if produced else "it has no outputs"
                )
                return Problem(
                    "BY216",
                    f"step '{name}' has no output '{path[3]}' ({listed})"
                    f"{did_you_mean(path[3], produced)}",
                )
        return None


def check_step_templates(index: FlowIndex, flow: Dataflow | None) -> None:
    """Every step-level template and expression of the flow, plus the memory scope."""
    for node in index.walk():
        before = flow.before(node) if flow is not None else None
        for source, where, expression, facts, items in _places(node, before, flow):
            names = (
                CONVERSATION if where[len(node.path) : len(node.path) + 1] == ("router",) else ()
            )
            scope = StepScope(index, node, facts, items, flow, names)
            for problem in scan(source, scope, expression=expression):
                index.report(where, problem.code, f"step '{node.id}': {problem.message}")
    memory = index.definition.spec.memory
    if memory is not None:
        _memory_scope(index, memory.scope)


Place = tuple[str, JsonPath, bool, tuple[Facts | None, Facts] | None, tuple[str, ...]]


def _places(
    node: StepNode, before: tuple[Facts | None, Facts] | None, flow: Dataflow | None
) -> Iterator[Place]:
    spec = node.spec
    items = node.region.items
    if node.action in ("uses", "flow"):
        for source, where in bindings(spec.with_, node.at("with")):
            yield source, where, False, before, items
    if spec.map is not None:
        yield spec.map.items, node.at("map", "items"), True, before, items
        for source, where in bindings(spec.map.with_, node.at("map", "with")):
            yield source, where, False, before, (*items, spec.map.as_)
    if spec.foreach is not None:
        yield spec.foreach.items, node.at("foreach", "items"), True, before, items
    if spec.router is not None:
        if spec.router.value is not None:
            yield spec.router.value, node.at("router", "value"), False, before, items
        for position, route in enumerate(spec.router.routes):
            if isinstance(route, ExprRoute):
                yield route.expr, node.at("router", "routes", position, "expr"), True, before, items
    if spec.loop is not None and spec.loop.until is not None:
        after = flow.at_body_end(node) if flow is not None and node.body is not None else None
        yield spec.loop.until, node.at("loop", "until"), True, after, items
    if spec.approval is not None:
        yield spec.approval.message, node.at("approval", "message"), False, before, items
    if isinstance(spec.require_approval, ApprovalSpec):
        yield (
            spec.require_approval.message,
            node.at("require_approval", "message"),
            False,
            before,
            items,
        )
    if spec.emit is not None:
        yield from emit_places(node, before, flow)


def _memory_scope(index: FlowIndex, source: str) -> None:
    flow = index.definition.spec

    def resolve(path: tuple[str, ...], guarded: bool) -> Problem | None:
        if path[0] == "inputs":
            if len(path) == 1 or path[1] in flow.inputs:
                return None
            return Problem(
                "BY402",
                f"unknown flow input 'inputs.{path[1]}'{did_you_mean(path[1], flow.inputs)}",
            )
        return Problem(
            "BY401",
            f"unknown variable '{path[0]}': the memory scope is rendered when the run "
            "starts and sees only inputs",
        )

    for problem in scan(source, resolve, expression=False):
        index.report(("memory", "scope"), problem.code, f"memory scope: {problem.message}")
