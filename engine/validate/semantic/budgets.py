"""A flow's budget against the most one of its runs can spend (docs/observability.md, "Budgets").

BY870: the worst case of a run (model calls, or output tokens when every model profile it uses has
`max_tokens`) is above a limit of the flow's budget (its own, or blockyard.yaml's). BY871: the
flow has a budget but nothing in its structure bounds its model calls. Both are warnings: the
budget is also enforced while the run goes on, and a worst case is rarely the usual case. BY817
(the yard's `policy: {require_budget: true}`): a flow without any budget.

The worst case of one run, counted as the runtime counts `model_call` events (failed calls too):
- an llm or decide step: its reply and the one repair a reply that does not match the outputs gets
  (engine/models/structured.py), on each attempt of its `retry:` (model blocks without one get
  three attempts on transient failures: engine/nodes/policies.py);
- a smart step: each prediction (several under `guardrails`) may take two calls (DSPy asks again
  in JSON when it cannot read a reply), on each attempt;
- an agent step: its `max_iterations` turns (default 10), each turn one call and retried as a
  step's attempts are; the whole agent is run again only after its block's `timeout:` (or any
  failure with `retry: {on: [any]}`). An agent with delegates has no bound: one reply may call
  them any number of times;
- a loop: `max_iterations` passes of its body; a foreach: a literal list's length, else the 1000
  items the derived step limit allows (the flow's `max_steps` instead, when set); a map: a
  literal list's length, else no bound; a subflow: its own worst case;
- a list of steps: its longest path when its steps run one at a time and go only forward (a router
  or a decide step takes one way); else the sum of its steps, each step with `max_visits` run at
  most that often and the others once per pass, with 1 + the sum of the `max_visits` passes (every
  cycle goes through such a step: BY307; the compiler's step limit counts the same way).
Client-side retries inside one call (`max_retries` of a profile) are one call; a thread's naming
call (`threads.name_model`) is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from jinja2 import nodes

from engine.definitions.project import FlowDef, Project
from engine.spec import AgentBlock, FlowSpec, ModelBlock, ModelProfile, RetrySpec
from engine.spec.block import DEFAULT_MAX_ITERATIONS
from engine.spec.budget import BudgetLimits, BudgetSpec, effective
from engine.spec.flow import END
from engine.templates.render import TemplateError, parse
from engine.validate.semantic import control
from engine.validate.semantic.control import CONCURRENT, ControlGraph
from engine.validate.semantic.index import FlowIndex, Region, StepNode, build_index

# the items a foreach may go over in a flow without `max_steps` (engine/compile/foreach.py, MAX_ITEMS;
# the compiler is above the validator: tests/validate/test_semantic_budgets.py keeps the two equal)
FOREACH_ITEMS = 1000
REPAIR = 2  # a structured reply, and the one repair it may get
DSPY_FORMATS = 2  # DSPy's chat format, then JSON when it could not read the reply
DEFAULT_PROFILE = "default"


@dataclass(frozen=True)
class Share:
    """The largest part of a worst case: how it arises (outermost first) and its model calls."""

    how: tuple[str, ...]
    calls: int


@dataclass(frozen=True)
class Worst:
    """The most model calls (None: no bound) and output tokens (None: unknown or no bound) of a part
    of a flow, the largest share of those calls, and why there is no bound (the first reason found)."""

    calls: int | None = 0
    tokens: int | None = 0
    share: Share | None = None
    unbounded: str | None = None

    def plus(self, other: Worst) -> Worst:
        """Both parts run."""
        return Worst(
            _add(self.calls, other.calls),
            _add(self.tokens, other.tokens),
            _larger(self.share, other.share),
            self.unbounded or other.unbounded,
        )

    def either(self, other: Worst) -> Worst:
        """One of the two parts runs."""
        return Worst(
            _most(self.calls, other.calls),
            _most(self.tokens, other.tokens),
            _larger(self.share, other.share),
            self.unbounded or other.unbounded,
        )

    def times(self, count: int, why: str) -> Worst:
        """The part runs `count` times, for the reason `why`."""
        if count == 0:
            return ZERO
        if self.calls == 0:
            return self
        share = (
            Share((why, *self.share.how), self.share.calls * count)
            if self.share is not None
            else None
        )
        return Worst(_mul(self.calls, count), _mul(self.tokens, count), share, self.unbounded)

    def inside(self, why: str) -> Worst:
        """The part as seen from where it runs: `why` names the step that runs it (a subflow step)."""
        if self.calls == 0:
            return self
        share = Share((why, *self.share.how), self.share.calls) if self.share is not None else None
        return replace(
            self, share=share, unbounded=f"{why}: {self.unbounded}" if self.unbounded else None
        )


ZERO = Worst()


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _most(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def _mul(a: int | None, count: int) -> int | None:
    return None if a is None else a * count


def _larger(a: Share | None, b: Share | None) -> Share | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.calls > a.calls else a


def _unbounded(reason: str) -> Worst:
    return Worst(None, None, None, reason)


def check_budgets(index: FlowIndex, graphs: dict[Region, ControlGraph] | None) -> None:
    """BY817 for a flow without a budget the policy requires; BY870, BY871 for a flow with one
    (only on a flow whose steps are sound: `graphs` is None otherwise)."""
    flow = index.definition.spec
    config = index.project.config
    budget = effective(flow.budget, config.budget)
    if budget is None:
        if config.policy.require_budget:
            index.report(
                ("flow",),
                "BY817",
                (
                    f"flow '{index.name}' has no budget, and the yard's policy requires one (policy.require_budget): "
                    "add `budget:` to the flow (model_calls, tokens, cost_usd or wall_time) or a default `budget:` to "
                    "blockyard.yaml"
                ),
            )
        return
    if graphs is None:
        return
    worst = Estimate(index.project).flow(index, graphs)
    if worst.calls is None:
        where = ("budget",) if flow.budget is not None else ("flow",)
        index.report(
            where,
            "BY871",
            (
                f"flow '{index.name}' has no bound on its model calls: {worst.unbounded}; only the budget "
                f"({_limits(budget)}) stops such a run"
            ),
            key=where == ("budget",),
        )
        return
    for scope in ((), ("per_turn",)):
        limits = budget.per_turn if scope else budget
        if limits is None:
            continue
        _over_calls(index, worst, limits, scope)
        _over_tokens(index, worst, limits, scope)


def _over_calls(
    index: FlowIndex, worst: Worst, limits: BudgetLimits, scope: tuple[str, ...]
) -> None:
    limit = limits.model_calls
    if limit is None or worst.calls is None or worst.calls <= limit or worst.share is None:
        return
    path, named = _limit_at(index, (*scope, "model_calls"))
    how = " × ".join(worst.share.how)
    part = "" if worst.share.calls == worst.calls else f"{worst.share.calls:,} of them from "
    index.report(
        path,
        "BY870",
        (
            f"flow '{index.name}' can make up to {worst.calls:,} model calls in one {_what(scope)}, above {named} "
            f"({limit:,}): {part}{how}"
        ),
    )


def _over_tokens(
    index: FlowIndex, worst: Worst, limits: BudgetLimits, scope: tuple[str, ...]
) -> None:
    limit = limits.tokens
    if limit is None or worst.tokens is None or worst.tokens <= limit:
        return
    path, named = _limit_at(index, (*scope, "tokens"))
    index.report(
        path,
        "BY870",
        (
            f"flow '{index.name}' can generate up to {worst.tokens:,} output tokens in one "
            f"{_what(scope)} ({worst.calls:,} "
            f"model calls, each up to its model profile's max_tokens), above {named} ({limit:,}), which counts input "
            "tokens too"
        ),
    )


def _what(scope: tuple[str, ...]) -> str:
    return "thread turn" if scope else "run"


def _limit_at(index: FlowIndex, key: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """Where a limit is reported (its value in the flow, else the flow's name) and how it is named."""
    named = "budget." + ".".join(key)
    own: object = index.definition.spec.budget
    for part in key:
        own = getattr(own, part, None)
    if own is not None:
        return ("budget", *key), named
    return ("flow",), f"blockyard.yaml's {named}"


def _limits(budget: BudgetSpec) -> str:
    """'model_calls 50, wall_time 10m' (the limits set, per run, then per turn)."""
    parts = [f"{key} {value}" for key, value in _set(budget)]
    if budget.per_turn is not None:
        parts += [f"per_turn.{key} {value}" for key, value in _set(budget.per_turn)]
    return ", ".join(parts)


def _set(limits: BudgetLimits) -> list[tuple[str, object]]:
    return [
        (key, value)
        for key in ("model_calls", "tokens", "cost_usd", "wall_time")
        if (value := getattr(limits, key)) is not None
    ]


@dataclass
class Estimate:
    """The worst case of flows of one project (subflows are estimated once, on their own index)."""

    project: Project
    flows: dict[str, Worst] = field(default_factory=dict)
    # flows being estimated: a subflow cycle (BY318) adds nothing
    active: set[str] = field(default_factory=set)

    def flow(self, index: FlowIndex, graphs: dict[Region, ControlGraph]) -> Worst:
        return self._region(index.root, _Flow(index, graphs))

    def _subflow(self, definition: FlowDef) -> Worst:
        name = definition.spec.flow
        if name in self.flows:
            return self.flows[name]
        if name in self.active:
            return ZERO
        self.active.add(name)
        index = build_index(self.project, definition)
        worst = self.flow(index, {region: control.build(region) for region in index.regions})
        self.active.discard(name)
        self.flows[name] = worst
        return worst

    def _region(self, region: Region, flow: _Flow) -> Worst:
        own = {node.id: self._step(node, flow) for node in region.steps}
        graph = flow.graphs.get(region)
        following = _one_at_a_time(graph) if graph is not None else None
        if following is not None:
            return _longest(region, following, own)
        return _summed(region, own)

    def _step(self, node: StepNode, flow: _Flow) -> Worst:
        spec = node.spec
        if spec.uses is not None:
            return self._block(node, flow, f"step '{node.id}'")
        if spec.flow is not None:
            if node.subflow is None:
                return ZERO
            return self._subflow(node.subflow).inside(
                f"subflow step '{node.id}' (flow '{spec.flow}')"
            )
        body = self._region(node.body, flow) if node.body is not None else ZERO
        if spec.loop is not None:
            return body.times(
                spec.loop.max_iterations,
                f"loop '{node.id}' (max_iterations {spec.loop.max_iterations})",
            )
        if spec.foreach is not None:
            count = literal_items(spec.foreach.items)
            if count is not None:
                return body.times(count, f"foreach '{node.id}' ({count} items)")
            steps = flow.spec.max_steps
            if steps is None:
                return body.times(
                    FOREACH_ITEMS, f"foreach '{node.id}' (up to {FOREACH_ITEMS} items)"
                )
            return body.times(steps, f"foreach '{node.id}' (up to {steps} items: max_steps)")
        if spec.map is not None:
            each = body
            if spec.map.uses is not None:
                each = self._block(node, flow, "each item")
            count = literal_items(spec.map.items)
            if count is not None:
                return each.times(count, f"map '{node.id}' ({count} items)")
            if each.calls == 0:
                return ZERO
            what = f"block '{spec.map.uses}'" if spec.map.uses is not None else "its steps"
            return _unbounded(
                f"map '{node.id}' runs {what} once per item of '{spec.map.items}', a list whose length "
                "is known only at run time"
            )
        return ZERO  # a router or an approval step: no model call

    def _block(self, node: StepNode, flow: _Flow, label: str) -> Worst:
        """One run of the block of a `uses:` step (or of one item of a `map:` with `uses:`)."""
        block = node.block_spec
        if not isinstance(block, ModelBlock):
            return ZERO
        if block.kind == "agent" and self._delegates_call(node, block, flow):
            names = ", ".join(f"'{name}'" for name in [*node.spec.delegates, *block.delegates])
            step = f"map '{node.id}'" if node.spec.map is not None else f"step '{node.id}'"
            return _unbounded(
                f"{step} runs agent '{block.block}', which may call its delegates ({names}) any "
                "number of times in one turn"
            )
        retry = block.retry or RetrySpec()
        attempts = retry.attempts if retry.on else 1
        each = "" if attempts == 1 else f", {attempts} attempts"
        if block.kind == "agent":
            turns = block.max_iterations or DEFAULT_MAX_ITERATIONS
            # the whole agent runs again only after the block's own timeout (the loop's failures are
            # not transient: engine/agents/plan.py, AgentFailed), or any failure with `on: [any]`
            whole = (
                attempts
                if "any" in retry.on or (block.timeout is not None and "timeout" in retry.on)
                else 1
            )
            calls = whole * turns * attempts
            how = f"{turns} turns" + (f", {attempts} attempts each" if attempts > 1 else "")
            how += f", the whole agent {whole} times" if whole > 1 else ""
        elif block.kind == "smart":
            predictions = block.guardrails.attempts if block.guardrails is not None else 1
            calls = attempts * predictions * DSPY_FORMATS
            how = (
                f"{predictions} prediction{'s' if predictions > 1 else ''} in {DSPY_FORMATS} formats (DSPy's "
                f"fallback){each}"
            )
        else:
            calls = attempts * REPAIR
            how = f"a call and its repair{each}"
        most = self._max_tokens(block)
        why = f"{label} ({block.kind} block '{block.block}', up to {calls} calls: {how})"
        return Worst(calls, calls * most if most is not None else None, Share((why,), calls))

    def _max_tokens(self, block: ModelBlock) -> int | None:
        """The most tokens one reply of the block's model may hold, when its profile says."""
        model = block.model
        if isinstance(model, ModelProfile):
            return model.max_tokens
        profile = self.project.config.models.get(model or DEFAULT_PROFILE)
        return profile.max_tokens if profile is not None else None

    def _delegates_call(self, node: StepNode, block: AgentBlock, flow: _Flow) -> bool:
        """Whether an agent's delegates may call a model (a flow may not), resolved as the compiler does:
        a step's delegates are agent steps of its list, else flows; a block's agent blocks, else flows."""
        for name in node.spec.delegates:
            sibling = flow.index.by_id.get(name)
            if (
                sibling is not None
                and sibling.block_spec is not None
                and sibling.block_spec.kind == "agent"
            ):
                return True
            if self._flow_calls(name):
                return True
        for name in block.delegates:
            found = self.project.block(name)
            if found is not None and found.spec.kind == "agent":
                return True
            if self._flow_calls(name):
                return True
        return False

    def _flow_calls(self, name: str) -> bool:
        """Whether flow `name` (when there is one) may call a model."""
        definition = self.project.flow(name)
        return definition is not None and self._subflow(definition).calls != 0


@dataclass(frozen=True)
class _Flow:
    """The flow whose regions are being estimated."""

    index: FlowIndex
    graphs: dict[Region, ControlGraph]

    @property
    def spec(self) -> FlowSpec:
        return self.index.definition.spec


def _one_at_a_time(graph: ControlGraph) -> dict[str, list[str]] | None:
    """Each step's successors (END left out) when the region's steps run one at a time and only go
    forward; None when a step starts several at once (`needs`) or an edge goes back."""
    if not graph.forward:
        return None
    following: dict[str, list[str]] = {}
    for source, edges in graph.out.items():
        started = {edge.target for edge in edges if edge.kind in CONCURRENT and edge.target != END}
        if len(started) > 1:
            return None
        following[source] = [edge.target for edge in edges if edge.target != END]
    return following


def _longest(region: Region, following: dict[str, list[str]], own: dict[str, Worst]) -> Worst:
    """The worst path through a region whose steps run one at a time, going forward only."""
    after: dict[str, Worst] = {}
    for node in reversed(region.steps):
        best: Worst | None = None
        for target in following.get(node.id, ()):
            if target in after:
                best = after[target] if best is None else best.either(after[target])
        after[node.id] = own[node.id].plus(best or ZERO)
    entry = region.entry
    return after[entry.id] if entry is not None else ZERO


def _summed(region: Region, own: dict[str, Worst]) -> Worst:
    """Every step of a region with parallel branches or cycles, each as often as it may run."""
    bounded = [node for node in region.steps if node.spec.max_visits is not None]
    passes = 1 + sum(node.spec.max_visits or 0 for node in bounded)
    total = ZERO
    for node in region.steps:
        worst = own[node.id]
        visits = node.spec.max_visits
        if visits is not None:
            worst = worst.times(visits, f"step '{node.id}' (max_visits {visits})")
        elif passes > 1:
            worst = worst.times(
                passes, f"{passes} passes of {region.describe()} (back-edges to max_visits steps)"
            )
        total = total.plus(worst)
    return total


def literal_items(expression: str) -> int | None:
    """The number of items of `items:` written as a literal list (`[a, b]`), else None."""
    try:
        body = parse(expression, expression=True).body
    except TemplateError:
        return None
    if len(body) == 1 and isinstance(body[0], nodes.Output) and len(body[0].nodes) == 1:
        value = body[0].nodes[0]
        if isinstance(value, nodes.List | nodes.Tuple):
            return len(value.items)
    return None
