"""The span tree of real runs (the example yard on the offline mock model, a real SQLite state database),
each span's OTLP body kept in memory and read back with the official protobuf classes: names, parents,
attributes, the GenAI conventions, no content unless `capture_content`, a failure, a gate and the resume
that links to it, a caller's traceparent."""

from __future__ import annotations

import asyncio
import gc
import json
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine import Yard
from engine.core import later
from engine.core.events import Event, RunStatus
from engine.runtime.execution import RunResult, collect
from engine.state import store
from engine.state.store import RunRecord
from engine.telemetry.exporter import Pipeline
from engine.telemetry.settings import Batching, Settings
from tests.support.example import copy_example_yard
from tests.support.otlp_sink import SpanRecord, decode

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SECRET_INPUT = "Zanzibar-Quokka"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_example_yard(tmp_path_factory.mktemp("example"))


ERROR = 2  # OTLP's Status.code
CLIENT = 3  # and Span.kind


class Kept:
    """An exporter that keeps each body it is given, decoded: the spans a receiver would read."""

    def __init__(self) -> None:
        self.kept: list[SpanRecord] = []

    def export(self, body: bytes, count: int) -> bool:
        spans = decode(body)
        assert len(spans) == count
        self.kept.extend(spans)
        return True

    def spans(self) -> list[SpanRecord]:
        later.flush()  # the trace observer is told on engine/core/later.py's thread: what waits, told now
        return list(self.kept)

    def clear(self) -> None:
        self.kept.clear()


@contextmanager
def traced(root: Path, *, capture: bool = False) -> Iterator[tuple[Yard, Kept, list[Event]]]:
    """The yard at `root` with its runs' spans kept in memory as they end (and their model_call events, to compare)."""
    memory = Kept()
    pipeline = Pipeline(
        Settings(endpoint="http://127.0.0.1:9/v1/traces", capture_content=capture),
        memory,
        batch=False,
    )
    calls: list[Event] = []

    def keep(run: RunRecord, event: Event, execution: Any) -> None:
        if event.type == "model_call":
            calls.append(event)

    with Yard.load(root) as yard:
        yard.engine.observers[:] = [
            pipeline.observer,
            keep,
        ]  # not the process's own exporter, if any
        yield yard, memory, calls


def shape(spans: Sequence[SpanRecord], root: SpanRecord | None = None) -> str:
    """A span tree as text, children sorted: `a(b,c(d))`, the same whatever order things ran in."""
    if root is None:
        (root,) = [
            span for span in spans if span.parent_id is None or span.flags & 0x200
        ]  # 0x200: a remote parent
    children = sorted(shape(spans, span) for span in spans if span.parent_id == root.span_id)
    return root.name + (f"({','.join(children)})" if children else "")


def attrs(span: SpanRecord) -> dict[str, Any]:
    return span.attributes


def one(spans: Sequence[SpanRecord], name: str) -> SpanRecord:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, [span.name for span in spans])
    return found[0]


def test_agents_their_tools_and_the_agents_they_call(example: Path) -> None:
    with traced(example) as (yard, memory, calls):
        result = yard.run("team_report", {"topic": "honeybees"})
    assert result.ok, result.error
    spans = memory.spans()
    assert shape(spans) == (
        "invoke_workflow team_report(invoke_agent coordinator(chat mock,chat mock,"
        "execute_tool research(invoke_agent researcher(chat mock,chat mock,execute_tool current_time)),"
        "execute_tool write(invoke_agent report_writer(chat mock,chat mock,execute_tool write_file))))"
    )
    assert len({span.trace_id for span in spans}) == 1  # one execution, one trace
    root = one(spans, "invoke_workflow team_report")
    assert attrs(root)["blockyard.run_id"] == result.run_id
    assert attrs(root)["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs(root)["gen_ai.workflow.name"] == "team_report"
    assert attrs(root)["blockyard.run.status"] == "finished"
    agent = one(spans, "invoke_agent researcher")
    assert attrs(agent)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(agent)["gen_ai.agent.name"] == "researcher"
    assert attrs(agent)["gen_ai.provider.name"] == "mock"  # named by its model calls
    tool = one(spans, "execute_tool current_time")
    assert attrs(tool)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(tool)["gen_ai.tool.name"] == "current_time"
    assert attrs(tool)["gen_ai.tool.call.id"]
    assert 0 < tool.start <= tool.end
    # each model_call event is one chat span, with its tokens
    chats = [span for span in spans if span.name.startswith("chat ")]
    assert len(chats) == len(calls) == attrs(root)["blockyard.usage.model_calls"]
    expected = sorted(
        (event.data["input_tokens"], event.data["output_tokens"], event.data["block"])
        for event in calls
    )
    assert (
        sorted(
            (
                attrs(span)["gen_ai.usage.input_tokens"],
                attrs(span)["gen_ai.usage.output_tokens"],
                attrs(span)["blockyard.block"],
            )
            for span in chats
        )
        == expected
    )
    assert attrs(root)["blockyard.usage.input_tokens"] == sum(
        event.data["input_tokens"] for event in calls
    )
    for span in chats:
        assert attrs(span)["gen_ai.operation.name"] == "chat"
        assert attrs(span)["gen_ai.request.model"] == "mock"
        # OpenInference receivers derive it from the operation
        assert "openinference.span.kind" not in attrs(span)
        assert span.kind == CLIENT
        assert span.parent_id is not None and span.start <= span.end


def test_maps_foreach_loops_and_subflows_nest_under_their_step(example: Path) -> None:
    with traced(example) as (yard, memory, _calls):
        batch = yard.run("summarize_batch", {"documents": ["one two. three", "four five."]})
        memory_batch = list(memory.spans())
        memory.clear()
        article = yard.run("write_article", {"topic": "bees"})
        memory_article = list(memory.spans())
        memory.clear()
        research = yard.run("research", {"question": "why do bees dance?"})
        memory_research = list(memory.spans())
    assert batch.ok and article.ok and research.ok
    assert shape(memory_batch) == (
        "invoke_workflow summarize_batch(step breathe,step bullets(step bullet,step bullet),step digest,"
        "step summaries(step summaries(chat mock),step summaries(chat mock)))"
    )
    items = [
        span
        for span in memory_batch
        if span.name == "step summaries" and "blockyard.index" in attrs(span)
    ]
    assert sorted(attrs(span)["blockyard.index"] for span in items) == [0, 1]
    assert shape(memory_article) == (
        "invoke_workflow write_article(step finalize,step outline(chat mock),"
        "step review_cycle(step critique(chat mock),step draft(chat mock)),step verdict(chat mock))"
    )
    headline = shape(memory_research, one(memory_research, "step headline"))
    assert headline == "step headline(step headline.summarize(chat mock))"
    subflow = one(memory_research, "step headline")
    assert attrs(subflow)["blockyard.subflow"] == "tldr"
    stamp = shape(memory_research, one(memory_research, "step stamp"))
    # a tool block's call, as long as its step
    assert stamp == "step stamp(execute_tool current_time)"


def test_no_content_unless_asked(example: Path) -> None:
    with traced(example) as (yard, memory, _calls):
        assert yard.run("hello", {"name": SECRET_INPUT}).ok
    text = json.dumps(
        [
            attrs(span) | {"events": [attributes for _name, attributes in span.events]}
            for span in memory.spans()
        ]
    )
    assert SECRET_INPUT not in text and SECRET_INPUT.upper() not in text
    with traced(example, capture=True) as (yard, memory, _calls):
        assert yard.run("hello", {"name": SECRET_INPUT}).ok
    spans = memory.spans()
    root = one(spans, "invoke_workflow hello")
    assert SECRET_INPUT in str(attrs(root)["input.value"])
    assert SECRET_INPUT.upper() in str(attrs(root)["output.value"])
    greet = one(spans, "step greet")
    assert json.loads(str(attrs(greet)["input.value"])) == {"name": SECRET_INPUT}


def test_a_failed_step_and_its_run_are_errors(make_yard: Any) -> None:
    root = make_yard(
        {
            "blocks/halve.yaml": """
            block: halve
            kind: transform
            inputs: {n: {type: integer}}
            outputs: {n: {type: integer}}
            compute: {n: "n // 0"}
        """,
            "flows/broken.yaml": """
            flow: broken
            inputs: {n: {type: integer, default: 4}}
            outputs: [n]
            steps:
              - {id: halve, uses: halve, with: {n: "{{ inputs.n }}"}}
        """,
        }
    )
    with traced(root) as (yard, memory, _calls):
        result = yard.run("broken", {})
    assert result.status == "failed"
    spans = memory.spans()
    step = one(spans, "step halve")
    assert step.status == ERROR and step.status_message
    assert attrs(step)["error.type"] == "_OTHER"
    run = one(spans, "invoke_workflow broken")
    assert run.status == ERROR
    assert attrs(run)["blockyard.run.status"] == "failed"
    assert attrs(run)["blockyard.run.error_step"] == "halve"


def test_a_gate_ends_the_execution_and_the_resume_links_to_it(example: Path) -> None:
    with traced(example) as (yard, memory, _calls):
        waiting = yard.run("order_lunch", {"user_id": "ada"})
        assert waiting.status == "waiting", waiting.error
        first = list(memory.spans())
        memory.clear()
        resumed = yard.resume(
            waiting.run_id, approve=True, values={"restaurant": "Chipotle", "dish": "burrito"}
        )
        assert resumed.status == "waiting", resumed.error  # the second gate: remember it?
        second = list(memory.spans())
    root = one(first, "invoke_workflow order_lunch")
    assert attrs(root)["blockyard.run.status"] == "waiting"
    assert shape(first) == "invoke_workflow order_lunch(gate ask,step check,step recall,step route)"
    again = one(second, "invoke_workflow order_lunch")
    assert again.trace_id != root.trace_id  # an execution is a trace of its own
    assert attrs(again)["blockyard.run_id"] == attrs(root)["blockyard.run_id"]
    assert attrs(again)["blockyard.run.resumed"] is True
    assert again.links == [(root.trace_id, root.span_id, {"blockyard.link": "previous_execution"})]
    assert [name for name, _attributes in again.events] == ["approval_decided"]
    assert shape(second) == "invoke_workflow order_lunch(gate remember,step ask)"


def test_a_callers_traceparent_is_the_parent_of_the_run(example: Path) -> None:
    with traced(example) as (yard, memory, _calls):
        yard.engine.traceparents["called-1"] = PARENT
        assert yard.run("hello", {}, run_id="called-1").ok
        spans = list(memory.spans())
        memory.clear()
        # the caller does not sample this trace
        yard.engine.traceparents["called-2"] = PARENT[:-2] + "00"
        assert yard.run("hello", {}, run_id="called-2").ok
        assert memory.spans() == []
        assert yard.engine.traceparents == {}  # taken by the executions
    root = one(spans, "invoke_workflow hello")
    assert root.parent_id == "00f067aa0ba902b7" and root.flags & 0x200  # a remote parent
    assert {span.trace_id for span in spans} == {"4bf92f3577b34da6a3ce929d0e0e4736"}


def test_the_sampler_the_environment_names_decides(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_TRACES_SAMPLER is the SDK's to apply (the default, parent-based always on, the observer applies
    itself: the test above): always_off traces nothing; always_on traces even what a caller does not sample."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    with traced(example) as (yard, memory, _calls):
        assert yard.run("hello", {}).ok
        assert memory.spans() == []
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
    with traced(example) as (yard, memory, _calls):
        yard.engine.traceparents["unsampled"] = PARENT[:-2] + "00"
        assert yard.run("hello", {}, run_id="unsampled").ok
        root = one(memory.spans(), "invoke_workflow hello")
    assert root.parent_id == "00f067aa0ba902b7"


def test_a_thread_turn_carries_its_conversation_id(example: Path) -> None:
    with traced(example) as (yard, memory, _calls):
        assert yard.run("support_chat", {"message": "My name is Ada"}, thread="ada-1").ok
    root = one(memory.spans(), "invoke_workflow support_chat")
    assert attrs(root)["gen_ai.conversation.id"] == "ada-1"


def test_spans_wait_as_bytes_the_garbage_collector_never_scans(example: Path) -> None:
    """What a run leaves behind until its batch leaves: each span's encoded bytes (not a container: the
    cyclic collector neither counts nor scans them), and nothing of its execution in the observer."""
    memory = Kept()
    pipeline = Pipeline(
        Settings(endpoint="http://127.0.0.1:9/v1/traces", batching=Batching(delay=60.0)), memory
    )
    try:
        with Yard.load(example) as yard:
            yard.engine.observers[:] = [pipeline.observer]
            assert yard.run("summarize_batch", {"documents": ["one two. three", "four five."]}).ok
        assert pipeline.batch is not None
        waiting = list(pipeline.batch.queue)
        # a batch of 512 or the delay: neither yet
        assert len(waiting) == 11 and memory.spans() == []
        assert all(type(span) is bytes and not gc.is_tracked(span) for span in waiting)
        assert pipeline.observer._live == {}
        pipeline.flush(20)
        assert shape(memory.spans()).startswith("invoke_workflow summarize_batch(")
    finally:
        pipeline.shutdown()


def test_the_observer_survives_what_it_was_not_built_for(make_yard: Any) -> None:
    """Events out of the usual order (a step's end without its start, a tool result without its call)
    still make a well-formed trace, never an error in the run."""
    root = make_yard(
        {
            "blocks/same.yaml": textwrap.dedent("""
            block: same
            kind: transform
            inputs: {n: {type: integer}}
            outputs: {n: {type: integer}}
            compute: {n: "n"}
        """),
            "flows/plain.yaml": "flow: plain\noutputs: [n]\nsteps:\n  - {id: same, uses: same, with: {n: 1}}\n",
        }
    )
    with traced(root) as (yard, memory, _calls):
        observer = yard.engine.observers[0]

        class Fake:
            traceparent = None
            compiled = yard.compiled(yard.bundle("plain"))

        record = RunRecord(
            id="odd", flow="plain", version=1, digest="d", status=RunStatus.RUNNING, inputs={}
        )
        fake = Fake()
        t = "2026-01-01T00:00:00.000Z"
        odd: list[tuple[str, str | None, dict[str, Any]]] = [
            ("run_started", None, {}),
            ("step_finished", "ghost", {}),
            ("tool_call", "same", {"tool": "x", "call_id": "c", "status": "ok", "duration_ms": 5}),
            (
                "model_call",
                None,
                {"provider": "openai", "model": "m", "ok": False, "error": "boom", "latency_ms": 3},
            ),
            ("run_finished", None, {"outputs": {}}),
        ]
        for kind, step, data in odd:
            observer(record, Event(kind, "odd", 1, step, t, data), fake)
    names = sorted(span.name for span in memory.spans())
    assert names == ["chat m", "execute_tool x", "invoke_workflow plain"]
    failed = one(memory.spans(), "chat m")
    assert failed.status == ERROR and failed.status_message == "boom"


def test_a_steps_span_is_made_when_needed_with_its_own_times(make_yard: Any) -> None:
    """A step of the flow's own list keeps only its start until something needs its span (engine/telemetry/
    spans.py): whatever needs it — nothing, a model call in it, a second start (a retry), its way out, the run's
    failure — the span has the step's own times and all it said."""
    root = make_yard(
        {
            "blocks/same.yaml": textwrap.dedent("""
            block: same
            kind: transform
            inputs: {n: {type: integer}}
            outputs: {n: {type: integer}}
            compute: {n: "n"}
        """),
            "flows/plain.yaml": "flow: plain\noutputs: [n]\nsteps:\n  - {id: same, uses: same, with: {n: 1}}\n",
        }
    )
    with traced(root) as (yard, memory, _calls):
        observer = yard.engine.observers[0]

        class Fake:
            traceparent = None
            compiled = yard.compiled(yard.bundle("plain"))

        record = RunRecord(
            id="made", flow="plain", version=1, digest="d2", status=RunStatus.RUNNING, inputs={}
        )
        fake = Fake()
        step = {"kind": "transform", "block": "same"}
        made: list[tuple[str, str | None, dict[str, Any], str]] = [
            ("run_started", None, {}, "00.000"),
            ("step_started", "alone", step, "00.100"),
            ("step_finished", "alone", {"status": "done"}, "00.250"),
            ("step_started", "asks", step, "01.000"),
            (
                "model_call",
                "asks",
                {"provider": "mock", "model": "m", "latency_ms": 100, "ok": True},
                "01.500",
            ),
            ("step_finished", "asks", {"decision": "approve"}, "01.600"),
            ("step_started", "again", step, "02.000"),
            ("step_started", "again", step, "02.300"),
            ("step_finished", "again", {}, "02.400"),
            ("step_started", "cut", step, "03.000"),
            ("run_failed", "cut", {"status": "failed", "error": "stopped"}, "03.500"),
        ]
        for kind, label, data, at in made:
            observer(record, Event(kind, "made", 1, label, f"2026-01-01T00:00:{at}Z", data), fake)
    spans = memory.spans()
    assert shape(spans) == (
        "invoke_workflow plain(step again,step again,step alone,step asks(chat m),step cut)"
    )
    zero = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
    alone = one(spans, "step alone")
    assert (alone.start - zero, alone.end - zero) == (100_000_000, 250_000_000)
    assert (
        attrs(alone)["blockyard.step.status"] == "done"
        and attrs(alone)["blockyard.step.kind"] == "transform"
    )
    asks = one(spans, "step asks")
    assert (asks.start - zero, asks.end - zero) == (1_000_000_000, 1_600_000_000)
    assert attrs(asks)["blockyard.step.decision"] == "approve"
    chat = one(spans, "chat m")
    assert chat.parent_id == asks.span_id and (chat.start - zero, chat.end - zero) == (
        1_400_000_000,
        1_500_000_000,
    )
    first, second = sorted(
        (span for span in spans if span.name == "step again"), key=lambda span: span.start
    )
    assert (first.start - zero, first.end - zero) == (
        2_000_000_000,
        2_300_000_000,
    )  # the retry ended it
    assert (second.start - zero, second.end - zero) == (2_300_000_000, 2_400_000_000)
    assert first.span_id != second.span_id
    cut = one(spans, "step cut")
    assert attrs(cut)["blockyard.ended_with_run"] is True and (cut.end - zero) == 3_500_000_000
    root_span = one(spans, "invoke_workflow plain")
    assert {span.parent_id for span in spans if span.name.startswith("step ")} == {
        root_span.span_id
    }


def test_a_queued_run_continues_its_callers_trace_on_the_server_that_starts_it(
    example: Path,
) -> None:
    """The caller's traceparent is stored with a queued run (migration 13), not only in the memory of the
    server that accepted it: the server that starts it (here a second engine on the same state database,
    as a replica would adopt it) continues the caller's trace."""
    with Yard.load(example) as accepting:
        accepting.engine.traceparents["queued-1"] = PARENT
        bundle = accepting.bundle("hello")
        queued = asyncio.run(accepting.engine.enqueue(bundle, {"name": "Ada"}, run_id="queued-1"))
        assert queued.traceparent == PARENT
    with traced(example) as (yard, memory, _calls):
        assert yard.engine.traceparents == {}  # nothing in this engine's memory: the row says it

        async def start() -> RunResult:
            # as a replica starts a queued run it adopted: the record as the state database has it
            record = await yard.engine.db.aread(lambda conn: store.get_run(conn, "queued-1"))
            assert record is not None and record.traceparent == PARENT
            return await collect(await yard.engine.start_queued(record))

        assert asyncio.run(start()).ok
    root = one(memory.spans(), "invoke_workflow hello")
    assert (root.trace_id, root.parent_id) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
    )
    assert root.flags & 0x200  # a remote parent
