"""Events: one schema for `blockyard run --json`, server-sent events and the trace table.

`{"type", "run_id", "seq", "step", "time", "data"}`; `seq` counts from 1 within a run and keeps
counting across resumes, `time` is ISO-8601 UTC with milliseconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, TypedDict

from engine.core.redaction import Masker
from engine.core.values import JsonDict


class EventType(StrEnum):
    """What an event says happened. The one declaration of event types: nodes emit the step ones
    (through engine/nodes/events.py), the runtime the rest. Members are str: stored and sent as text."""

    RUN_STARTED = "run_started"
    STEP_STARTED = "step_started"
    STEP_FINISHED = "step_finished"
    STEP_FAILED = "step_failed"
    TOKEN = "token"
    TOOL_CALL = "tool_call"
    FILE_WRITTEN = (
        "file_written"  # a file tool wrote a file of the run's output folder: path, bytes
    )
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_DECIDED = "approval_decided"  # who decided a gate, how, when (engine/state/gates.py)
    WARNING = "warning"
    RUN_FINISHED = "run_finished"
    RUN_FAILED = "run_failed"
    MODEL_CALL = "model_call"  # one call of a model: provider, model, tokens, latency, cost (engine/core/usage.py)
    THREAD_NAME = "thread_name"  # the name a conversation thread got on its first turn (engine/runtime/naming.py)
    TURN_WRITTEN = "turn_written"  # a thread's turn a client wrote, not its flow (engine/state/written_turns.py)


RUN_STARTED = EventType.RUN_STARTED
STEP_STARTED = EventType.STEP_STARTED
STEP_FINISHED = EventType.STEP_FINISHED
STEP_FAILED = EventType.STEP_FAILED
TOKEN = EventType.TOKEN
TOOL_CALL = EventType.TOOL_CALL
FILE_WRITTEN = EventType.FILE_WRITTEN
APPROVAL_REQUIRED = EventType.APPROVAL_REQUIRED
APPROVAL_DECIDED = EventType.APPROVAL_DECIDED
WARNING = EventType.WARNING
RUN_FINISHED = EventType.RUN_FINISHED
RUN_FAILED = EventType.RUN_FAILED
THREAD_NAME = EventType.THREAD_NAME
MODEL_CALL = EventType.MODEL_CALL
TURN_WRITTEN = EventType.TURN_WRITTEN

EVENT_TYPES: tuple[EventType, ...] = tuple(EventType)
# Events a compiled graph may write to LangGraph's custom stream; the run_* ones are ours alone.
STEP_EVENT_TYPES = frozenset(
    {STEP_STARTED, STEP_FINISHED, STEP_FAILED, TOKEN, TOOL_CALL, FILE_WRITTEN, WARNING, MODEL_CALL}
)
# The last event of one execution of a run (a resume starts a new execution).
TERMINAL_TYPES = frozenset({RUN_FINISHED, RUN_FAILED, APPROVAL_REQUIRED})
# Streamed live but not kept in the trace table: one row per generated token would dwarf the rest.
NOT_STORED = frozenset({TOKEN})
# Names a step's `emit:` may not use for its custom events: the engine's own event types, and the
# other names a client sees on an event stream (the SSE `error`, the thread events of docs/serve.md).
RESERVED_EVENT_NAMES = frozenset(
    {*EVENT_TYPES, "error", "thread_id", "thread_name", "complete", "message", "custom", "ping"}
)
CUSTOM_MARK = "custom"  # a custom stream payload with this key set is a step's own event (`emit:`)


class EventDoc(NamedTuple):
    """What users read about one event type: what its `step` holds and what its `data` carries
    (Markdown; links are relative to docs/)."""

    step: str
    data: str


# The one description of each event type's `step` and `data`: docs/reference/events.md is generated from it
# (`python -m engine.reference`), and a test wants an entry for every member of EventType.
EVENT_DOCS: dict[EventType, EventDoc] = {
    RUN_STARTED: EventDoc(
        "–",
        "`flow`, `version`, `digest`, `inputs`; `resumed: true` on a resume; `note` (the "
        "mock-model note); `output_dir` when the run writes its files to a folder of the yard",
    ),
    STEP_STARTED: EventDoc(
        "step id", "`block`, `kind`, `inputs`; `attempt` on retries; where it runs (below)"
    ),
    STEP_FINISHED: EventDoc("step id", "`block`, `outputs`, `duration_ms`; where it runs (below)"),
    STEP_FAILED: EventDoc(
        "step id", "`block`, `error`, `duration_ms`, `attempt`; where it runs (below)"
    ),
    TOKEN: EventDoc(
        "step id",
        "`text` (a streamed piece of a model's reply: llm, decide and agent steps; "
        "[models.md](models.md#token-streaming)), `block`; streamed live, not stored",
    ),
    TOOL_CALL: EventDoc("step id", "`tool`, `args`, `block`"),
    FILE_WRITTEN: EventDoc(
        "step id",
        "`path` (relative to the run's output folder), `bytes`, `block`; `index` in an "
        "item ([tools.md](tools.md#file-tools))",
    ),
    APPROVAL_REQUIRED: EventDoc("gate", "`interrupt_id`, `value` (the gate's message and fields)"),
    APPROVAL_DECIDED: EventDoc(
        "gate",
        "`gate`, `interrupt_id`, `decision`, `values`, `actor`, `reason`, `time`, "
        "`timed_out`: who decided the gate, how and when; recorded with the decision "
        "([approvals.md](approvals.md))",
    ),
    WARNING: EventDoc(
        "step id",
        "`code`, `message` (a retry, an exhausted loop, `emit_failed`, `history_cut`: "
        "a thread's conversation longer than `threads.history_chars`, with `dropped_turns`, "
        "...)",
    ),
    RUN_FINISHED: EventDoc("–", "`status: finished`, `outputs`, `duration_ms` (all executions)"),
    RUN_FAILED: EventDoc(
        "failing step", "`status` (`failed` or `interrupted`), `error`, `step`, `block`"
    ),
    MODEL_CALL: EventDoc(
        "step id (none for a thread's naming call)",
        "`block`, `purpose`, `provider`, `model`, `profile`, `input_tokens`, `output_tokens`, "
        "`cached_tokens`, `reasoning_tokens`, `latency_ms`, `ttft_ms`, `cost_usd`, `price_source`, "
        "`ok`; `error` when the call failed; `turn` for agents; `index` in an item "
        "([observability.md](observability.md#model-calls))",
    ),
    THREAD_NAME: EventDoc(
        "–",
        "`thread_id`, `name`: on a conversation thread's first turn, the name it got "
        "([memory.md](memory.md#thread-names)); before the terminal event",
    ),
    TURN_WRITTEN: EventDoc(
        "–",
        "`by` (`POST /threads/{id}/state`), `as_node`, `message`, `reply`: a turn of a conversation "
        "thread a client wrote instead of its flow saying it "
        "([langgraph-api.md](langgraph-api.md#writing-a-threads-state)); its only event before "
        "`run_finished`",
    ),
}


class RunStatus(StrEnum):
    """Where a run is. The one declaration of run statuses: the `runs` table, `RunResult`, the
    run_finished/run_failed events' `status`, `blockyard runs`, the HTTP API. Members are str, so
    they compare equal to the text read back from the database or JSON."""

    QUEUED = "queued"  # a server accepted it; it waits for a free slot (engine/serve/jobs.py)
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    WAITING = "waiting"  # paused at an approval gate
    INTERRUPTED = "interrupted"  # its process stopped before it ended (or Ctrl-C)


# The statuses a run has in the state database (`queued`: a new run a server accepted, recorded
# before its answer so that no replica's death loses it: docs/postgres.md, "The queue").
STORED_STATUSES: tuple[RunStatus, ...] = (
    RunStatus.QUEUED,
    RunStatus.RUNNING,
    RunStatus.FINISHED,
    RunStatus.FAILED,
    RunStatus.WAITING,
    RunStatus.INTERRUPTED,
)
# A run in one of these will not change again by itself.
SETTLED_STATUSES = frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.INTERRUPTED})


_second: tuple[int, str] = (-1, "")


def now_iso() -> str:
    """The current time as ISO-8601 UTC with milliseconds, e.g. 2026-11-22T02:31:05.123Z."""
    global _second
    now = time.time()
    whole = int(now)
    if whole != _second[0]:  # formatting a datetime costs more than the rest of an event
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{int((now - whole) * 1000):03d}Z"


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class EventDict(TypedDict):
    """An `Event` as JSON data: what `--json` prints, server-sent events carry and the server keeps."""

    type: str
    run_id: str
    seq: int
    step: str | None
    time: str
    data: JsonDict


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened in a run (as JSON data: `EventDict`)."""

    type: str
    run_id: str
    seq: int
    step: str | None
    time: str
    data: JsonDict = field(default_factory=dict)

    def as_dict(self) -> EventDict:
        return {
            "type": str(self.type),
            "run_id": self.run_id,
            "seq": self.seq,
            "step": self.step,
            "time": self.time,
            "data": self.data,
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False, separators=(",", ":"), default=str)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            data["type"],
            data["run_id"],
            int(data["seq"]),
            data.get("step"),
            data["time"],
            dict(data.get("data") or {}),
        )


class Sequencer:
    """Numbers a run's events; a resumed run continues after the last stored number."""

    def __init__(self, run_id: str, last: int = 0, *, secrets: Masker | None = None) -> None:
        self.run_id = run_id
        self.last = last
        self.secrets = secrets if secrets is not None else Masker()

    def make(self, type_: str, step: str | None = None, data: JsonDict | None = None) -> Event:
        """The next event; API keys in its data are masked (engine/core/redaction.py): events are stored,
        printed (--json) and streamed (server-sent events)."""
        self.last += 1
        return Event(
            str(type_), self.run_id, self.last, step, now_iso(), self.secrets.value(data or {})
        )

    def from_custom(self, payload: Any) -> Event | None:
        """An event from a graph node's custom stream, or None when it is not one of ours: a step
        event, or a custom event of a step's `emit:` (its type is its name)."""
        if not isinstance(payload, dict):
            return None
        kind = payload.get("type")
        if kind not in STEP_EVENT_TYPES and not (
            payload.get(CUSTOM_MARK) is True
            and isinstance(kind, str)
            and kind not in RESERVED_EVENT_NAMES
        ):
            return None
        data = payload.get("data")
        step = payload.get("step")
        return self.make(
            payload["type"],
            str(step) if step is not None else None,
            dict(data) if isinstance(data, dict) else {"value": data} if data is not None else {},
        )
