"""Events: one schema for `blockyard run --json`, server-sent events and the trace table.

`{"type", "run_id", "seq", "step", "time", "data"}`; `seq` counts from 1 within a run and keeps
counting across resumes, `time` is ISO-8601 UTC with milliseconds.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.redaction import Masker

RUN_STARTED = "run_started"
STEP_STARTED = "step_started"
STEP_FINISHED = "step_finished"
STEP_FAILED = "step_failed"
TOKEN = "token"
TOOL_CALL = "tool_call"
FILE_WRITTEN = "file_written"  # a file tool wrote a file of the run's output folder: path, bytes
APPROVAL_REQUIRED = "approval_required"
APPROVAL_DECIDED = "approval_decided"  # who decided a gate, how, when (engine/runtime/gates.py)
WARNING = "warning"
RUN_FINISHED = "run_finished"
RUN_FAILED = "run_failed"

EVENT_TYPES = (RUN_STARTED, STEP_STARTED, STEP_FINISHED, STEP_FAILED, TOKEN, TOOL_CALL, FILE_WRITTEN,
               APPROVAL_REQUIRED, APPROVAL_DECIDED, WARNING, RUN_FINISHED, RUN_FAILED)
# Events a compiled graph may write to LangGraph's custom stream; the run_* ones are ours alone.
STEP_EVENT_TYPES = frozenset({STEP_STARTED, STEP_FINISHED, STEP_FAILED, TOKEN, TOOL_CALL, FILE_WRITTEN, WARNING})
# The last event of one execution of a run (a resume starts a new execution).
TERMINAL_TYPES = frozenset({RUN_FINISHED, RUN_FAILED, APPROVAL_REQUIRED})
# Streamed live but not kept in the trace table: one row per generated token would dwarf the rest.
NOT_STORED = frozenset({TOKEN})


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


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened in a run."""

    type: str
    run_id: str
    seq: int
    step: str | None
    time: str
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "run_id": self.run_id, "seq": self.seq, "step": self.step,
                "time": self.time, "data": self.data}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False, separators=(",", ":"), default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        return cls(data["type"], data["run_id"], int(data["seq"]), data.get("step"), data["time"],
                   dict(data.get("data") or {}))


class Sequencer:
    """Numbers a run's events; a resumed run continues after the last stored number."""

    def __init__(self, run_id: str, last: int = 0, *, secrets: Masker | None = None) -> None:
        self.run_id = run_id
        self.last = last
        self.secrets = secrets if secrets is not None else Masker()

    def make(self, type_: str, step: str | None = None, data: dict[str, Any] | None = None) -> Event:
        """The next event; API keys in its data are masked (engine/redaction.py): events are stored,
        printed (--json) and streamed (server-sent events)."""
        self.last += 1
        return Event(type_, self.run_id, self.last, step, now_iso(), self.secrets.value(data or {}))

    def from_custom(self, payload: Any) -> Event | None:
        """An event from a graph node's custom stream, or None when it is not one of ours."""
        if not isinstance(payload, dict) or payload.get("type") not in STEP_EVENT_TYPES:
            return None
        data = payload.get("data")
        step = payload.get("step")
        return self.make(payload["type"], str(step) if step is not None else None,
                         dict(data) if isinstance(data, dict) else {"value": data} if data is not None else {})
