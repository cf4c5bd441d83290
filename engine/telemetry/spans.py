"""The span tree of one execution of a run, built from its events as they come.

    invoke_workflow <flow>                the execution (a resume is an execution of its own)
      step <id>                           a step; `invoke_agent <block>` for an agent step
        chat <model>                      a model call (a `model_call` event; it ended at the event)
        execute_tool <tool>               a tool call; a step an agent delegates to nests under it
        step <id>                         the body of a loop, foreach or map; a subflow's steps

A step's span starts at its `step_started` event and ends at its `step_finished` or `step_failed`
(map items and foreach iterations keyed by `data.index`); a model call's span ends at its
`model_call` event and started `latency_ms` before. Whose child a step is comes from the flow's
layout (engine/telemetry/layout.py) and from the agent delegations still open.

A span is written as OTLP protobuf bytes the moment it ends (engine/telemetry/wire.py) and handed,
as bytes, to the pipeline's batch (engine/telemetry/batch.py): no OpenTelemetry SDK span is ever
made. Per span that is two ids, two times and the few values that vary, next to its `head` (name,
kind, fixed attributes), encoded once per flow definition and kept with the definition's layout; an
open span is an `Open` of plain values, and a step of the flow's own list keeps only its start until
something needs its span (a model call in it, a step of its body) or it ends. This runs on the run's
event loop, between two of its events: what it costs a run is docs/performance.md's "OpenTelemetry
traces" (through the SDK's ReadableSpan and BatchSpanProcessor, 9–15% of a run's CPU: their queued
objects set off garbage collections of their own besides).
"""

from __future__ import annotations

import calendar
import os
import random
from collections.abc import Callable, Mapping
from typing import Any

from engine.core.events import (
    APPROVAL_DECIDED,
    APPROVAL_REQUIRED,
    FILE_WRITTEN,
    MODEL_CALL,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    STEP_FAILED,
    STEP_FINISHED,
    STEP_STARTED,
    TOOL_CALL,
    WARNING,
    Event,
)
from engine.state.store import RunRecord
from engine.telemetry import semconv, wire
from engine.telemetry.layout import EMPTY, Layout
from engine.telemetry.semconv import Attributes

Emit = Callable[[bytes], None]  # takes one ended span, encoded (wire.span)
# tool calls that run steps of the flow (engine/agents)
DELEGATIONS = frozenset({"step", "agent", "flow"})
_HEADS_KEPT = 4096  # encoded heads kept per kind: a yard's steps, blocks and models; TaskPlans make up new ones

_seconds: dict[
    str, int
] = {}  # "2026-11-28T07:15:28" -> epoch seconds: events of one second share it
_last: tuple[str, int] = (
    "",
    0,
)  # the last time read and its value: consecutive events often share a millisecond


def time_ns(text: str) -> int:
    """An event's time (ISO-8601 UTC with milliseconds, engine/core/events.py) in ns since the epoch."""
    global _last
    last = _last  # one read: threads replace the pair whole
    if text == last[0]:
        return last[1]
    whole = text[:19]
    seconds = _seconds.get(whole)
    if seconds is None:
        if len(_seconds) > 4096:
            _seconds.clear()
        # by hand: time.strptime would import _strptime and compile its regular expressions on a run's loop
        seconds = _seconds[whole] = calendar.timegm(
            (
                int(text[0:4]),
                int(text[5:7]),
                int(text[8:10]),
                int(text[11:13]),
                int(text[14:16]),
                int(text[17:19]),
            )
        )
    value = seconds * 1_000_000_000 + int(text[20:23]) * 1_000_000
    _last = (text, value)
    return value


# Ids from a generator of the process's own, seeded from os.urandom: a fifth of the cost of os.urandom per
# id (what OpenTelemetry's own RandomIdGenerator does, on `random`'s shared generator). Its own so that a
# program's random.seed() cannot make two runs share ids; reseeded in a forked child, which would
# otherwise repeat its parent's ids.
_ids = random.Random()
os.register_at_fork(after_in_child=_ids.seed)
_bits = _ids.getrandbits


def new_span_id() -> bytes:
    return (_bits(64) or 1).to_bytes(8, "big")


def new_trace_id() -> bytes:
    return (_bits(128) or 1).to_bytes(16, "big")


class Open:
    """A span that has started and not ended: plain values, its `head` encoded already."""

    __slots__ = (
        "agent",
        "children",
        "events",
        "extra",
        "flow",
        "head",
        "index",
        "label",
        "parent",
        "span_id",
        "start",
    )

    def __init__(
        self,
        head: bytes,
        span_id: bytes,
        parent: bytes | None,
        start: int,
        label: str | None = None,
        index: Any = None,
        flow: str | None = None,
        agent: bool = False,
        extra: Attributes | None = None,
    ) -> None:
        self.head = head
        self.span_id = span_id
        self.parent = parent
        self.start = start
        self.label = label
        self.index = index  # the map item or foreach iteration of a step's span
        self.flow = flow  # the subflow a `flow:` step (or a delegated flow) runs: its steps' layout
        self.agent = agent  # an agent step's span: it names the model its calls talk to
        self.extra = (
            extra  # attributes besides the head's: what varies, what is learnt as the span goes on
        )
        self.events: list[bytes] | None = (
            None  # encoded Span.Events (warnings, written files, a decision)
        )
        self.children: list[Open] | None = None  # tool blocks' calls: they end with their step

    def set(self, key: str, value: semconv.AttributeValue) -> None:
        if self.extra is None:
            self.extra = {}
        self.extra[key] = value


# Heads, by what makes them: the same for every run of a flow definition, encoded once
_step_heads: dict[tuple[str, Any, Any, Any], tuple[bytes, bool]] = {}  # -> (head, an agent's?)
_chat_heads: dict[
    tuple[Any, ...], tuple[bytes, str, str]
] = {}  # -> (head, gen_ai.provider.name, model)
_tool_heads: dict[tuple[Any, Any, Any], bytes] = {}
_root_heads: dict[
    tuple[str, int, str], bytes
] = {}  # (flow, version, digest) -> the head of its executions' roots
_ERROR_TYPE = wire.pair(9, "error.type", semconv.OTHER_ERROR)
_NUMBER = (int, float)  # for isinstance: `int | float` would make a new union object at every call
_chat_numbers = wire.Numbers(semconv.CHAT_NUMBERS)
_usage = wire.Numbers(
    (key, f"blockyard.usage.{key}")
    for key in ("model_calls", "input_tokens", "output_tokens", "cost_usd")
)
# the run's status on its root, by status (a handful): encoded once
_statuses: dict[str, bytes] = {}


def _status(status: str) -> bytes:
    found = _statuses.get(status)
    if found is None:
        found = wire.pair(9, "blockyard.run.status", status)
        if len(_statuses) < 64:
            _statuses[status] = found
    return found


def _keep(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) < _HEADS_KEPT:
        cache[key] = value


def step_head(label: str, data: Mapping[str, Any]) -> tuple[bytes, bool]:
    kind, block, flow = data.get("kind"), data.get("block"), data.get("flow")
    key = (label, kind, block, flow)
    found = _step_heads.get(key)
    if found is None:
        name, attributes = semconv.step(label, kind, block, flow)
        found = (wire.head(name, wire.INTERNAL, attributes), kind == "agent")
        _keep(_step_heads, key, found)
    return found


def chat_head(data: Mapping[str, Any]) -> tuple[bytes, str, str]:
    key = tuple(map(data.get, semconv.CHAT_FIXED))
    found = _chat_heads.get(key)
    if found is None:
        name, attributes = semconv.chat(data)
        found = (
            wire.head(name, wire.CLIENT, attributes),
            str(attributes["gen_ai.provider.name"]),
            str(attributes["gen_ai.request.model"]),
        )
        _keep(_chat_heads, key, found)
    return found


def tool_head(data: Mapping[str, Any]) -> bytes:
    key = (data.get("tool"), data.get("kind"), data.get("block"))
    found = _tool_heads.get(key)
    if found is None:
        name, attributes = semconv.tool(*key)
        found = wire.head(name, wire.INTERNAL, attributes)
        _keep(_tool_heads, key, found)
    return found


def _subflow(data: Mapping[str, Any]) -> str | None:
    """The flow a `flow:` step runs."""
    flow = data.get("flow")
    return flow if data.get("kind") == "flow" and isinstance(flow, str) else None


def _call_id(data: Mapping[str, Any]) -> Attributes | None:
    call_id = data.get("call_id")
    return {"gen_ai.tool.call.id": call_id} if isinstance(call_id, str) and call_id else None


def _failed(message: str) -> bytes:
    return wire.status(wire.ERROR, message)


def _ending(kind: str, data: Mapping[str, Any]) -> bytes:
    """What a step's span learns as it ends (a `step_finished` or `step_failed` event's data), encoded: a
    failure's status, a loop's way out, a gate's decision."""
    if kind == STEP_FAILED:
        return _ERROR_TYPE + _failed(str(data.get("error") or "the step failed"))
    way = data.get("status")
    decision = data.get("decision")
    if way is None and decision is None:
        return b""
    learnt = b""
    if isinstance(way, str):
        learnt += wire.pair(9, "blockyard.step.status", way)
    if isinstance(decision, str):
        learnt += wire.pair(9, "blockyard.step.decision", decision)
    return learnt


class ExecutionTrace:
    """The spans of one execution, whose root span starts at `start` (ns). `see(event)` for each of its
    events, in order; True once the execution ended (its root span is emitted). `parent`: the span id of
    the caller's span (a W3C traceparent, in trace `trace_id`); `previous`: (trace id, span id) of the
    run's execution before this one, which the root links to."""

    def __init__(
        self,
        run: RunRecord,
        layout: Layout,
        emit: Emit,
        start: int,
        *,
        capture: bool = False,
        trace_id: bytes | None = None,
        parent: bytes | None = None,
        previous: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.run = run
        self.layout = layout
        self.plans: dict[str, tuple[bytes, bool, str | None, bool]] = layout.steps
        self.emit = emit
        self.capture = capture
        self.trace_id = trace_id if trace_id is not None else new_trace_id()
        self.parent = parent
        self.previous = previous
        self.ended = False
        # a step's open span by its label, an item's by (label, index)
        self.steps: dict[str | tuple[str, Any], Open] = {}
        self.starts: dict[
            str, int
        ] = {}  # label -> the start of a step of the flow's list whose span is not made yet
        # label -> the open spans of its items (map items, foreach iterations), latest last
        self.items: dict[str, list[Open]] = {}
        self.calls: dict[
            tuple[str, Any, str], Open
        ] = {}  # (label, index, call id) -> an agent's open tool call
        self.delegations: list[
            tuple[str, str, Open]
        ] = []  # (agent label, tool, span): steps an agent called
        self.spend = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        # the last event's time and in ns, and its second and in ns (read and kept by the observer too)
        self.time = ""
        self.at = 0
        self.second = "~"  # no time starts with it
        self.second_ns = 0
        self.root = self._open_root(start)

    # ---- events -------------------------------------------------------------------------------------

    def see(self, event: Event) -> bool:
        """What `event` does to the trace; True once the execution ended. (engine/telemetry/observer.py does
        the same inline for the events after an execution's first.)"""
        handler = HANDLERS.get(event.type)
        return handler(self, event, self.clock(event.time)) if handler is not None else False

    def clock(self, text: str) -> int:
        """An event's time in ns, kept with its second: the events after it mostly share them."""
        at = self.at = time_ns(text)
        self.time = text
        self.second = text[:19]
        self.second_ns = at - at % 1_000_000_000
        return at

    def _run_started(self, event: Event, at: int) -> bool:
        root = self.root
        if event.data.get("resumed"):
            root.set("blockyard.run.resumed", True)
        if self.capture:
            root.extra = root.extra or {}
            semconv.inputs(root.extra, event.data.get("inputs"))
        return False

    def _decided(self, event: Event, at: int) -> bool:
        root = self.root
        decided = {
            "blockyard.gate": str(event.step or event.data.get("gate")),
            "blockyard.decision": str(event.data.get("decision")),
        }
        root.events = root.events or []
        root.events.append(wire.event(at, "approval_decided", decided))
        return False

    def _waiting(self, event: Event, at: int) -> bool:
        self._gate(event, at)
        if not self.ended:
            self._end_root(at, _status("waiting"))
        return True

    def _finished(self, event: Event, at: int) -> bool:
        if self.capture:
            root = self.root
            root.extra = root.extra or {}
            semconv.outputs(root.extra, event.data.get("outputs"))
        self._end_root(at, _status("finished"))
        return True

    def _failed_run(self, event: Event, at: int) -> bool:
        root = self.root
        status = str(event.data.get("status") or "failed")
        if event.step:
            root.set("blockyard.run.error_step", event.step)
        root.set("error.type", status if status == "interrupted" else semconv.OTHER_ERROR)
        self._end_root(at, _status(status) + _failed(str(event.data.get("error") or status)))
        return True

    def _open_root(self, at: int) -> Open:
        run = self.run
        key = (run.flow, run.version, run.digest)
        head = _root_heads.get(key)
        if head is None:
            head = wire.head(
                f"{semconv.WORKFLOW} {run.flow}", wire.INTERNAL, semconv.workflow(*key)
            )
            _keep(_root_heads, key, head)
        # + the run's
        return Open(head + wire.attributes(9, semconv.run(run)), new_span_id(), self.parent, at)

    def _step_started(self, event: Event, at: int) -> bool:
        label = event.step or "?"
        data = event.data
        index = data.get("index")
        extra: Attributes | None = None
        if index is None:
            key: str | tuple[str, Any] = label
            plan = self.plans.get(label)
            if plan is None:
                plan = self._plan(label, data)
            head, agent, flow, top = plan
            if top and not self.delegations and not self.capture:
                # a step of the flow's own list, under the root: its start is all there is to keep until
                # something needs its span (`_opened`: a model call in it, a step in its body), or it ends
                if label in self.starts or label in self.steps:
                    # started again (a retry) before it ended
                    earlier = self._opened(label)
                    if earlier is not None:
                        self._close(earlier, at)  # the earlier attempt ends here
                self.starts[label] = at
                return False
            parent = self.root if top and not self.delegations else self._parent_of(label, index)
        else:  # an item of a map, an iteration of a foreach's body
            key = (label, index)
            head, agent = step_head(label, data)
            flow = _subflow(data)
            parent = self._parent_of(label, index)
            if isinstance(index, int):
                extra = {"blockyard.index": index}
        if self.capture and "inputs" in data:
            extra = extra or {}
            semconv.inputs(extra, data["inputs"])
        span = Open(head, new_span_id(), parent.span_id, at, label, index, flow, agent, extra)
        steps = self.steps
        before = steps.get(key)
        if before is not None:
            # started again (a retry) before it ended: the earlier attempt ends here
            self._close(before, at)
        steps[key] = span
        if index is not None:
            # items of one label: which is the latest (a step's own span is found by its label)
            items = self.items.get(label)
            if items is None:
                self.items[label] = [span]
            else:
                items.append(span)
        return False

    def _opened(self, label: str) -> Open | None:
        """The span of step `label`, made now if only its start was kept (`_step_started`); None if it is not open."""
        start = self.starts.pop(label, None)
        if start is None:
            return self.steps.get(label)
        head, agent, flow, _top = self.plans[label]
        span = self.steps[label] = Open(
            head, new_span_id(), self.root.span_id, start, label, None, flow, agent
        )
        return span

    def _plan(self, label: str, data: Mapping[str, Any]) -> tuple[bytes, bool, str | None, bool]:
        """What the spans of step `label` (not an item) share, worked out at its first start and kept with the
        definition's layout: its head, whether it is an agent's, the subflow it runs, and whether it sits
        in the flow's own list (under the root, but for a delegation)."""
        head, agent = step_head(label, data)
        plan = (
            head,
            agent,
            _subflow(data),
            "." not in label and label not in self.layout.root.container,
        )
        self.plans[label] = plan
        return plan

    def _step_ended(self, event: Event, at: int) -> bool:
        label = event.step or "?"
        data = event.data
        index = data.get("index")
        if index is None:
            start = self.starts.pop(label, None)
            if start is not None:  # nothing needed its span: made and ended at once
                self.emit(
                    wire.span(
                        self.trace_id,
                        new_span_id(),
                        self.root.span_id,
                        self.plans[label][0],
                        start,
                        at if at > start else start,
                        _ending(event.type, data),
                    )
                )
                return False
        span = self.steps.get(label if index is None else (label, index))
        if span is None:
            return False  # it started in an earlier execution (a resumed gate or a step run inline before)
        if self.capture and event.type != STEP_FAILED and "outputs" in data:
            span.extra = span.extra or {}
            semconv.outputs(span.extra, data["outputs"])
        if index is None and span.children is None:  # most steps: what _close does, in short
            del self.steps[label]
            self._end(span, at, _ending(event.type, data))
        else:
            self._close(span, at, _ending(event.type, data))
        return False

    def _model_call(self, event: Event, at: int) -> bool:
        data: Mapping[str, Any] = event.data
        parent = self._enclosing(event.step, data.get("index"))
        head, provider, model = chat_head(data)
        rest = _chat_numbers(data)
        latency = data.get("latency_ms")
        start = (
            at - int(latency * 1_000_000)
            if isinstance(latency, _NUMBER) and 0 < latency < at / 1e6
            else at
        )
        if data.get("ok") is False:
            rest += wire.pair(9, "error.type", semconv.OTHER_ERROR)
            rest += _failed(str(data.get("error") or "the model call failed"))
        self.emit(wire.span(self.trace_id, new_span_id(), parent.span_id, head, start, at, rest))
        if parent.agent:  # an agent's span names the model it talks to
            extra = parent.extra
            if extra is None:
                extra = parent.extra = {}
            extra.setdefault("gen_ai.provider.name", provider)
            extra.setdefault("gen_ai.request.model", model)
        spend = self.spend
        spend["model_calls"] += 1
        value = data.get("input_tokens")
        if type(value) is int:
            spend["input_tokens"] += value
        value = data.get("output_tokens")
        if type(value) is int:
            spend["output_tokens"] += value
        cost = data.get("cost_usd")
        if isinstance(cost, _NUMBER) and not isinstance(cost, bool):
            spend["cost_usd"] += cost
        return False

    def _tool_call(self, event: Event, at: int) -> bool:
        data = event.data
        kind = data.get("kind")
        if kind == "answer":
            # an agent's final answer, given as a call of its answer tool: no tool runs
            return False
        label = event.step or "?"
        index = data.get("index")
        status = data.get("status")
        call_id = data.get("call_id")
        if status == "started" and isinstance(call_id, str):
            parent = self._enclosing(event.step, index)
            call = Open(
                tool_head(data),
                new_span_id(),
                parent.span_id,
                at,
                label=label,
                extra=_call_id(data),
            )
            if self.capture and "args" in data:
                call.set("gen_ai.tool.call.arguments", semconv.content(data["args"]))
            self.calls[(label, index, call_id)] = call
            if kind in DELEGATIONS:
                self.delegations.append((label, str(data.get("tool")), call))
            return False
        if status in ("ok", "error", "rejected"):  # rejected: a person said no, nothing ran
            span: Open | None = (
                self.calls.pop((label, index, call_id), None) if isinstance(call_id, str) else None
            )
            if span is None:
                # no announcement (a call refused before it ran): timed by its duration
                parent = self._enclosing(event.step, index)
                took = data.get("duration_ms")
                start = at - int(took * 1_000_000) if isinstance(took, _NUMBER) and took > 0 else at
                span = Open(
                    tool_head(data),
                    new_span_id(),
                    parent.span_id,
                    start,
                    label=label,
                    extra=_call_id(data),
                )
            else:
                self.delegations = [entry for entry in self.delegations if entry[2] is not span]
            if self.capture and "result" in data:
                span.set("gen_ai.tool.call.result", semconv.content(data["result"]))
            if status == "rejected":
                span.set("blockyard.tool.decision", "reject")
                self._close(span, at)
            elif status == "error":
                span.set("error.type", semconv.OTHER_ERROR)
                self._close(span, at, _failed(str(data.get("error") or "the tool failed")))
            else:
                self._close(span, at)
            return False
        # a tool block's call (engine/executors/tool.py): it runs until its step ends
        step = self._enclosing(event.step, index)
        call = Open(
            tool_head(data), new_span_id(), step.span_id, at, label=label, extra=_call_id(data)
        )
        if self.capture and "args" in data:
            call.set("gen_ai.tool.call.arguments", semconv.content(data["args"]))
        if step.children is None:
            step.children = []
        step.children.append(call)
        return False

    def _note(self, event: Event, at: int) -> bool:
        """A warning or a written file: an event on its step's span."""
        data = event.data
        span = self._enclosing(event.step, data.get("index"))
        noted: Attributes
        if event.type == WARNING:
            noted = {
                key: str(data[key]) for key in ("code", "message") if data.get(key) is not None
            }
        else:
            noted = {
                "blockyard.file.path": str(data.get("path")),
                "blockyard.file.bytes": int(data.get("bytes") or 0),
            }
        if span.events is None:
            span.events = []
        span.events.append(wire.event(at, str(event.type), noted))
        return False

    def _gate(self, event: Event, at: int) -> None:
        """A gate the run now waits at: a span of no length under the workflow (or its step)."""
        # the root ended already when several gates wait: their spans are its children all the same
        value = event.data.get("value")
        step = event.step or (value.get("step") if isinstance(value, dict) else None) or "?"
        head = wire.head(
            f"gate {step}", wire.INTERNAL, {"blockyard.gate": step, semconv.KIND: "CHAIN"}
        )
        self.emit(wire.span(self.trace_id, new_span_id(), self.root.span_id, head, at, at))

    # ---- the tree -----------------------------------------------------------------------------------

    def _parent_of(self, label: str, index: Any) -> Open:
        """The span a starting step's span is the child of."""
        # a step an agent called (a delegation): under that tool call
        for position, (agent, tool, span) in enumerate(self.delegations):
            prefix = agent.rpartition(".")[0]
            if label in (f"{agent}.{tool}", f"{prefix}.{tool}" if prefix else tool):
                del self.delegations[position]
                return span
        # an item of a map that runs one block per item: under the map's own span
        if index is not None:
            whole = self._opened(label)
            if whole is not None:
                return whole
        if "." not in label:  # a step of the run's own flow: under the body that holds it, if any
            container = self.layout.root.container.get(label)
            found = self._latest(container) if container is not None else None
            return found if found is not None else self.root
        prefix, _, step_id = label.rpartition(".")
        enclosing = self._latest(prefix)
        if enclosing is None:
            # the subflow step ended already (an event out of order): keep it in the trace
            return self.root
        flow = self.layout.flows.get(enclosing.flow, EMPTY) if enclosing.flow else EMPTY
        container = flow.container.get(step_id)
        if container is not None:
            found = self._latest(f"{prefix}.{container}")
            if found is not None:
                return found
        return enclosing

    def _enclosing(self, label: str | None, index: Any) -> Open:
        """The open span events of step `label` (item `index`) belong to: the step's, else the workflow's."""
        if label is None:
            return self.root
        span = self._opened(label) if index is None else self.steps.get((label, index))
        if span is None:
            span = self._latest(label)
        return span if span is not None else self.root

    def _latest(self, label: str) -> Open | None:
        """The open span of step `label` started last: its latest item's, else its own."""
        items = self.items.get(label)
        return items[-1] if items else self._opened(label)

    # ---- ending -------------------------------------------------------------------------------------

    def _close(self, span: Open, at: int, status: bytes = b"") -> None:
        if span.children is not None:
            for child in span.children:
                self._end(child, at)
            span.children = None
        label = span.label
        if label is not None:
            index = span.index
            if index is None:
                if self.steps.get(label) is span:
                    del self.steps[label]
            else:
                items = self.items.get(label)
                if items is not None and span in items:
                    items.remove(span)
                    if not items:  # no list left behind for the run's end
                        del self.items[label]
                if self.steps.get((label, index)) is span:
                    del self.steps[(label, index)]
        self._end(span, at, status)

    def _end_root(self, at: int, status: bytes = b"") -> None:
        """End the execution: what is still open ends with it (steps cut short by a failure), then the root."""
        root = self.root
        for label in list(self.starts):  # steps cut short: their spans end with the run's
            self._opened(label)
        if self.steps or self.calls:
            for span in [*self.calls.values(), *reversed(list(self.steps.values()))]:
                span.set("blockyard.ended_with_run", True)
                self._close(span, at)
            self.calls.clear()
            self.steps.clear()
            self.items.clear()
        self.delegations.clear()
        self.ended = True
        rest = status
        spend = self.spend
        if spend["model_calls"]:  # the execution's model calls, their tokens and cost
            rest += _usage(spend)
        if self.previous is not None:  # the run's execution before this one, in this process
            rest += wire.link(*self.previous, {"blockyard.link": "previous_execution"})
        self._end(root, at, rest, wire.REMOTE if self.parent is not None else wire.LOCAL)

    def _end(self, span: Open, at: int, status: bytes = b"", flags: bytes = wire.LOCAL) -> None:
        rest = wire.attributes(9, span.extra) if span.extra is not None else b""
        if span.events is not None:
            rest += b"".join(span.events)
        start = span.start
        self.emit(
            wire.span(
                self.trace_id,
                span.span_id,
                span.parent,
                span.head,
                start,
                at if at > start else start,
                rest + status if status else rest,
                flags,
            )
        )


# what each event does to the trace (the others: nothing); True once the execution ended
HANDLERS: dict[str, Callable[[ExecutionTrace, Event, int], bool]] = {
    STEP_STARTED: ExecutionTrace._step_started,
    STEP_FINISHED: ExecutionTrace._step_ended,
    STEP_FAILED: ExecutionTrace._step_ended,
    MODEL_CALL: ExecutionTrace._model_call,
    TOOL_CALL: ExecutionTrace._tool_call,
    RUN_STARTED: ExecutionTrace._run_started,
    WARNING: ExecutionTrace._note,
    FILE_WRITTEN: ExecutionTrace._note,
    APPROVAL_DECIDED: ExecutionTrace._decided,
    APPROVAL_REQUIRED: ExecutionTrace._waiting,
    RUN_FINISHED: ExecutionTrace._finished,
    RUN_FAILED: ExecutionTrace._failed_run,
}
