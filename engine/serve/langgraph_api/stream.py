"""A run's events as the parts of a LangGraph stream, one SSE message each, for the stream modes asked for.

| mode | parts |
| --- | --- |
| `values` | the state when the run starts and when it ends; `{"__interrupt__": [...]}` when it waits at a gate |
| `updates` | `{step: outputs}` as each step finishes; `{"__interrupt__": [...]}` at a gate |
| `messages-tuple` | each token as `messages` `[AIMessageChunk, metadata]`; as a step ends, a last empty chunk |
|                  | with the `usage_metadata` of its model calls |
| `messages` | `messages/metadata`, then `messages/partial` (the reply so far), `messages/complete` per step (with |
|            | the step's `usage_metadata`) |
| `custom` | the events steps publish with `emit:`, their data as it is |
| `events` | LangChain's stream events: `on_chain_start`/`on_chain_end` (the flow, its steps), |
|          | `on_chat_model_stream`, `on_tool_start`, `on_custom_event` |

A run that fails ends with an `error` part. Each part's SSE id is `<seq>.<n>`: the seq of the event it comes
from and its place among that event's parts, so a client that reconnects with `Last-Event-ID` gets exactly
the parts after the last one it saw (tokens are live only: they are not replayed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from sse_starlette import ServerSentEvent

from engine.core.events import (
    APPROVAL_REQUIRED,
    EVENT_TYPES,
    MODEL_CALL,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    STEP_FINISHED,
    STEP_STARTED,
    THREAD_NAME,
    TOKEN,
    TOOL_CALL,
    RunStatus,
)
from engine.core.usage import Spend
from engine.core.values import JsonDict
from engine.serve.langgraph_api import messages as lc
from engine.serve.langgraph_api.interrupts import interrupt
from engine.serve.problems import ApiError
from engine.serve.sse import MAX_SEQ
from engine.state import threads

SUPPORTED_MODES = frozenset({"values", "updates", "messages", "messages-tuple", "custom", "events"})

Part = tuple[str, Any]


@dataclass(frozen=True)
class Resume:
    """Where a reconnecting client left off: the parts of event `seq` up to `part` were delivered."""

    seq: int = 0
    part: int = -1

    @property
    def after(self) -> int:
        """Events to read: those after this seq, and this one again when some of its parts were not sent."""
        return self.seq - 1 if self.seq and self.part >= 0 else self.seq


def resume_point(request: Request) -> Resume | None:
    """The Last-Event-ID of a reconnect (`<seq>.<n>`, or a bare `<seq>`); None without one; 400 when malformed."""
    return point_of((request.headers.get("last-event-id") or "").strip())


def point_of(raw: str) -> Resume | None:
    """An SSE id this stream sent (`<seq>.<n>`, or a bare `<seq>`) as a Resume; None for ""; 400 otherwise."""
    if not raw:
        return None
    seq, dot, part = raw.partition(".")
    # the length first: int() refuses more than 4300 digits (a ValueError, not a bad request)
    if (
        len(raw) > 40
        or not (
            seq.isascii() and seq.isdigit() and (not dot or (part.isascii() and part.isdigit()))
        )
        or int(seq) > MAX_SEQ
    ):
        raise ApiError(
            400,
            "bad_last_event_id",
            f"Last-Event-ID must be an id this stream sent (<seq>.<n>), not '{raw[:40]}'",
        )
    return Resume(int(seq), int(part) if dot else -1)


def sse(event: str, data: Any, event_id: str | None = None) -> ServerSentEvent:
    return ServerSentEvent(
        data=json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str),
        event=event,
        id=event_id,
    )


@dataclass
class Translator:
    """Turns one run's events into stream parts. `before` is the thread's conversation before this turn
    (None for a run without a thread whose flow takes no message)."""

    modes: frozenset[str]
    run_id: str
    thread_id: str | None
    flow: str
    inputs: JsonDict
    before: list[JsonDict] | None
    written: dict[str, str] = field(default_factory=dict)  # step -> the text of its tokens so far
    # the run's model calls (its earlier ones, read before the stream's first event, and those seen since):
    # the reply's usage_metadata; and each step's since its last step_finished: its streamed message's
    spent: Spend = field(default_factory=Spend)
    step_spent: dict[str, Spend] = field(default_factory=dict)
    # a regenerated answer's turn says the message of this turn again: the human message keeps that turn's id
    said_by: str | None = None

    def metadata(self) -> ServerSentEvent:
        return sse("metadata", {"run_id": self.run_id, "thread_id": self.thread_id, "attempt": 1})

    def messages(
        self, run_id: str, outputs: Mapping[str, Any] | None, usage: Spend | None = None
    ) -> list[JsonDict] | None:
        if self.before is None:
            return None
        said = [
            *self.before,
            lc.human(threads.turn_text(self.inputs), lc.human_id(self.said_by or run_id)),
        ]
        if outputs is not None:
            said.append(
                lc.ai(
                    threads.reply_text(dict(outputs)),
                    lc.ai_id(run_id),
                    usage=usage if usage is not None else self.spent,
                )
            )
        return said

    def values(self, outputs: Mapping[str, Any] | None, usage: Spend | None = None) -> JsonDict:
        """The values with the reply; its usage is `usage` (the run's record), else the model calls seen."""
        found = {**self.inputs, **(outputs or {})}
        said = self.messages(self.run_id, outputs, usage)
        if said is not None:
            found["messages"] = said
        return found

    def _meta(self, step: str | None) -> JsonDict:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.flow,
            "graph_id": self.flow,
            "langgraph_node": step,
            "langgraph_checkpoint_ns": "",
            "langgraph_triggers": [],
        }

    def _stream_event(self, kind: str, name: str, data: JsonDict, step: str | None) -> Part:
        return "events", {
            "event": kind,
            "name": name,
            "run_id": self.run_id,
            "tags": [],
            "data": data,
            "metadata": self._meta(step),
            "parent_ids": [],
        }

    def parts(self, event: Mapping[str, Any]) -> list[Part]:
        """The parts of one Blockyard event, in order. (Called once per event, tokens included: each kind
        has its own method, a plain call, and the parts are built only for the modes asked for.)"""
        kind, step, data = event["type"], event.get("step"), event.get("data") or {}
        want = self.modes
        if kind == TOKEN:
            return self._token_parts(step, data)
        if kind == RUN_STARTED:
            return self._run_started_parts()
        if kind == STEP_STARTED:
            if "events" in want:
                return [
                    self._stream_event(
                        "on_chain_start", str(step), {"input": data.get("inputs")}, step
                    )
                ]
            return []
        if kind == STEP_FINISHED:
            return self._step_finished_parts(step, data)
        if kind == MODEL_CALL:
            self.spent.add(data)
            if step is not None:
                # a call outside the steps (naming the thread) counts for the reply only
                self.step_spent.setdefault(str(step), Spend()).add(data)
            return []
        if kind == TOOL_CALL:
            if "events" in want:
                return [
                    self._stream_event(
                        "on_tool_start",
                        str(data.get("tool") or data.get("name") or "tool"),
                        {"input": data},
                        step,
                    )
                ]
            return []
        if kind == APPROVAL_REQUIRED:
            found = {"__interrupt__": [interrupt(data)]}
            return [(mode, found) for mode in ("values", "updates") if mode in want]
        if kind == RUN_FINISHED:
            return self._run_finished_parts(data)
        if kind == RUN_FAILED:
            if data.get("status", RunStatus.FAILED) == RunStatus.FAILED:
                return [
                    (
                        "error",
                        {
                            "error": "RunFailed",
                            "message": str(data.get("error") or "the run failed"),
                        },
                    )
                ]
            return []
        if kind not in EVENT_TYPES and kind != THREAD_NAME:  # a step's own event (`emit:`)
            return self._custom_parts(kind, step, data)
        return []

    def _run_started_parts(self) -> list[Part]:
        out: list[Part] = []
        if "values" in self.modes:
            out.append(("values", self.values(None)))
        if "events" in self.modes:
            out.append(
                self._stream_event("on_chain_start", self.flow, {"input": self.inputs}, None)
            )
        return out

    def _token_parts(self, step: str | None, data: Mapping[str, Any]) -> list[Part]:
        """A token: a chunk of the step's message, and (`messages` mode) the whole message so far."""
        want = self.modes
        out: list[Part] = []
        text = str(data.get("text") or "")
        message_id = f"{lc.ai_id(self.run_id)}-{step}"
        chunk = lc.ai(text, message_id, chunk=True)
        self.written[str(step)] = self.written.get(str(step), "") + text
        if "messages-tuple" in want:
            out.append(("messages", [chunk, self._meta(step)]))
        if "messages" in want:
            if len(self.written[str(step)]) == len(text):
                out.append(("messages/metadata", {message_id: {"metadata": self._meta(step)}}))
            out.append(("messages/partial", [lc.ai(self.written[str(step)], message_id)]))
        if "events" in want:
            out.append(
                self._stream_event(
                    "on_chat_model_stream", str(data.get("block") or step), {"chunk": chunk}, step
                )
            )
        return out

    def _step_finished_parts(self, step: str | None, data: Mapping[str, Any]) -> list[Part]:
        """A finished step: its update, its streamed message complete, and the usage of its model calls."""
        want = self.modes
        out: list[Part] = []
        message_id = f"{lc.ai_id(self.run_id)}-{step}"
        usage = self.step_spent.pop(str(step), None)
        streamed = str(step) in self.written
        if "updates" in want:
            out.append(("updates", {str(step): data.get("outputs")}))
        if "messages" in want and str(step) in self.written:
            out.append(
                ("messages/complete", [lc.ai(self.written.pop(str(step)), message_id, usage=usage)])
            )
        if "events" in want:
            out.append(
                self._stream_event("on_chain_end", str(step), {"output": data.get("outputs")}, step)
            )
        # last, so that the numbers of the parts before it (SSE ids) do not depend on it
        if "messages-tuple" in want and streamed and usage is not None:
            out.append(
                ("messages", [lc.ai("", message_id, chunk=True, usage=usage), self._meta(step)])
            )
        return out

    def _run_finished_parts(self, data: Mapping[str, Any]) -> list[Part]:
        outputs = data.get("outputs") or {}
        out: list[Part] = []
        if "values" in self.modes:
            out.append(("values", self.values(outputs)))
        if "events" in self.modes:
            out.append(self._stream_event("on_chain_end", self.flow, {"output": outputs}, None))
        return out

    def _custom_parts(self, kind: str, step: str | None, data: JsonDict) -> list[Part]:
        """A step's own event (`emit:`): a custom part, and an on_custom_event."""
        out: list[Part] = []
        if "custom" in self.modes:
            out.append(("custom", data))
        if "events" in self.modes:
            out.append(self._stream_event("on_custom_event", kind, data, step))
        return out

    def messages_of(self, event: Mapping[str, Any], resume: Resume | None) -> list[ServerSentEvent]:
        """The SSE messages of one event, without those a reconnecting client already has."""
        seq = int(event["seq"])
        found = []
        for index, (name, data) in enumerate(self.parts(event)):
            if resume is not None and seq == resume.seq and index <= resume.part:
                continue
            found.append(sse(name, data, f"{seq}.{index}"))
        return found
