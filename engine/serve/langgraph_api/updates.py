"""`POST /threads/{id}/state`: a client writes a thread's messages (LangGraph's `update_state`), recorded as
turns (engine/state/written_turns.py) — never a silent change (docs/langgraph-api.md, "Writing a thread's
state").

The write starts at one of the thread's checkpoints (`checkpoint` / `checkpoint_id`: the end of a finished
turn, or `__start__`; by default where a plain turn would go on from) and applies `values.messages` as
LangGraph's `add_messages` would: a message whose `id` is one of the conversation's replaces it, any other
is added at the end. The conversation must then be pairs of a human message and its AI reply, as every turn
is one of each: the pairs from the first one that changed on are written as new turns, after the turns
before it — a new branch when that is not the thread's latest — and the answer names the last one's end.
The values of the flow's other declared inputs are written to the thread (engine/state/thread_inputs.py):
each later turn takes them for the inputs its run does not give.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.core.events import RunStatus, now_iso
from engine.core.values import JsonDict, value_problem
from engine.serve.langgraph_api import state
from engine.serve.langgraph_api.access import check_free, held, service
from engine.serve.langgraph_api.bodies import Lenient
from engine.serve.langgraph_api.messages import HUMAN_TYPES, message_input, text_of
from engine.serve.problems import ApiError, conflict, not_found
from engine.serve.server import Server
from engine.spec import TypeSpec
from engine.spec.typecheck import TypeMismatch, conform
from engine.state import store, thread_inputs, threads, written_turns
from engine.state.store import RunRecord

AI_TYPES = ("ai", "assistant")
WRITER = "POST /threads/{id}/state"


class StateUpdate(Lenient):
    values: Any = None
    as_node: str | None = None
    checkpoint: JsonDict | None = None
    checkpoint_id: str | None = None


@dataclass(frozen=True)
class _Message:
    kind: str  # human | ai
    text: str
    id: str | None


def _refuse(message: str, field: str = "values") -> ApiError:
    return ApiError(422, "invalid_request", message, field=field)


async def update(server: Server, view: state.ThreadView, body: StateUpdate) -> JsonDict:
    """Write the body's inputs to the thread and its messages as turns; the checkpoint it ends at."""
    thread_id = view.thread.id
    check_free(server, thread_id, "write it")
    if not view.thread.flow:
        raise conflict("no_flow", f"thread '{thread_id}' has no flow yet: its first run says which")
    entry = server.flow(view.thread.flow)
    message_key = message_input(entry.bundle)
    if not isinstance(body.values, Mapping):
        raise _refuse("values: must be an object: `messages`, or inputs of the thread's flow")
    inputs = _inputs(entry.name, entry.bundle.flow.inputs, message_key, body.values)
    if "messages" not in body.values:
        await _write_inputs(server, thread_id, inputs, body.as_node)
        base = state.latest(view)
        return {"checkpoint": _checkpoint(thread_id, base.id if base is not None else state.START)}
    outputs = list(entry.bundle.flow.outputs)
    if message_key is None or len(outputs) != 1:
        raise _refuse(
            f"flow '{entry.name}' does not take one message and give one reply (a `message` input or "
            "its only text input, and one output): its thread's turns are written by its runs only"
        )
    sent = _sent(body.values)
    base = _base(view, body)
    current = [_Message(m["type"], str(m["content"]), m["id"]) for m in state.talk(view, base)]
    result = _applied(current, sent)
    first = _first_change(current, result)
    # the messages are checked by now: a write refused for them writes no input either
    await _write_inputs(server, thread_id, inputs, body.as_node)
    if first is None:  # nothing changed: the write is its start
        return {"checkpoint": _checkpoint(thread_id, base.id if base is not None else state.START)}
    turns = _branch_turns(view, base)
    after = turns[first - 1].id if first > 0 else None
    said = [
        written_turns.Said(result[n].text, result[n + 1].text)
        for n in range(2 * first, len(result), 2)
    ]
    runs = service(server)
    digest, text = runs.engine.pin(entry.bundle)
    now = now_iso()
    template = RunRecord(
        id="",
        flow=entry.name,
        version=entry.version,
        digest=digest,
        status=RunStatus.FINISHED,
        inputs={},
        created=now,
        started=now,
        finished=now,
    )
    outcome = await runs.engine.db.writer.call(
        written_turns.write(
            thread_id,
            after,
            said,
            template,
            store.save_definition(digest, entry.name, entry.version, text, now),
            by=WRITER,
            as_node=body.as_node,
            message_key=message_key,
            reply_key=outputs[0],
        )
    )
    if outcome is None:
        raise not_found("thread", f"unknown thread '{thread_id}'")
    if isinstance(outcome, threads.Busy):
        raise held(thread_id, outcome, "write it")
    return {"checkpoint": _checkpoint(thread_id, outcome[-1])}


async def _write_inputs(
    server: Server, thread_id: str, inputs: Mapping[str, Any], as_node: str | None
) -> None:
    """The inputs written to the thread (engine/state/thread_inputs.py), the write recorded with them."""
    if not inputs:
        return
    done = await service(server).engine.db.writer.call(
        thread_inputs.write(thread_id, inputs, WRITER, as_node, now_iso())
    )
    if isinstance(done, threads.Busy):
        raise held(thread_id, done, "write it")


def _checkpoint(thread_id: str, checkpoint_id: str) -> JsonDict:
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "checkpoint_map": None,
    }


def _inputs(
    flow: str, declared: Mapping[str, TypeSpec], message_key: str | None, values: Mapping[str, Any]
) -> JsonDict:
    """The flow's inputs the body writes (all but `messages`), each checked against its declared type (null:
    no longer written); 422 for a key that is not one of them."""
    kept = [key for key in declared if key != message_key]
    found: JsonDict = {}
    for key, value in values.items():
        if key == "messages":
            continue
        if key not in kept:
            what = (
                "the message each turn says"
                if key == message_key
                else f"not an input of flow '{flow}'"
            )
            raise _refuse(
                f"values.{str(key)[:80]}: {what}; a thread keeps `messages` and its flow's other "
                f"inputs ({', '.join(kept) or 'none'})"
            )
        if value is None:
            found[key] = None
            continue
        problem = value_problem(value, key)
        if problem is not None:
            raise _refuse(f"values: {problem}")
        try:
            found[key] = conform(value, declared[key], key, text_from_numbers=True)
        except TypeMismatch as exc:
            raise _refuse(f"values: {exc}") from None
    return found


def _sent(values: Mapping[str, Any]) -> list[_Message]:
    """The messages of the body's `values`."""
    given = values.get("messages")
    listed = [given] if isinstance(given, Mapping) else given
    if not isinstance(listed, list) or not listed:
        raise _refuse("values.messages: must be a message or a list of messages")
    found: list[_Message] = []
    for n, message in enumerate(listed):
        kind = message.get("type", message.get("role")) if isinstance(message, Mapping) else None
        text = text_of(message.get("content")) if isinstance(message, Mapping) else None
        if kind not in (*HUMAN_TYPES, *AI_TYPES) or text is None:
            raise _refuse(
                f"values.messages[{n}]: a human or AI message with text content (a turn is a "
                "message and its reply)"
            )
        given_id = message.get("id")
        found.append(
            _Message(
                "human" if kind in HUMAN_TYPES else "ai",
                text,
                str(given_id) if given_id is not None else None,
            )
        )
    return found


def _base(view: state.ThreadView, body: StateUpdate) -> RunRecord | None:
    """The finished turn the write starts at (None: the thread's start)."""
    wanted: Any = body.checkpoint_id
    if body.checkpoint is not None and body.checkpoint.get("checkpoint_id") is not None:
        wanted = body.checkpoint["checkpoint_id"]
    if wanted is None:
        return state.latest(view)
    if wanted == state.START:
        return None
    turn = view.turn(wanted) if isinstance(wanted, str) else None
    if turn is None:
        raise not_found(
            "checkpoint", f"thread '{view.thread.id}' has no checkpoint '{wanted}' to write at"
        )
    if turn.id not in view.messages:
        raise conflict(
            "turn_unfinished",
            f"turn {turn.id} of thread '{view.thread.id}' did not finish: a write starts at the end "
            "of a finished turn",
        )
    return turn


def _applied(current: list[_Message], sent: list[_Message]) -> list[_Message]:
    """`sent` applied to `current` as `add_messages` does; 422 unless it is then pairs of message and reply."""
    result = list(current)
    where = {message.id: n for n, message in enumerate(current)}
    for message in sent:
        n = where.get(message.id) if message.id is not None else None
        if n is None:
            result.append(message)
        elif result[n].kind != message.kind:
            raise _refuse(f"values.messages: message '{message.id}' is a {result[n].kind} message")
        else:
            result[n] = message
    for n, message in enumerate(result):
        if message.kind != ("human" if n % 2 == 0 else "ai"):
            raise _refuse(
                "values.messages: the conversation must be pairs of a human message and its AI "
                f"reply (message {n} would be a {message.kind} message): a turn is one of each"
            )
    if len(result) % 2:
        raise _refuse(
            "values.messages: the last human message has no reply; send its reply too, or run "
            "the flow with it"
        )
    return result


def _first_change(current: list[_Message], result: list[_Message]) -> int | None:
    """The first turn (pair) whose message or reply changed, or was added; None when none did."""
    for n in range(0, len(result), 2):
        before = current[n : n + 2]
        if [(m.kind, m.text) for m in before] != [(m.kind, m.text) for m in result[n : n + 2]]:
            return n // 2
    return None


def _branch_turns(view: state.ThreadView, base: RunRecord | None) -> list[RunRecord]:
    """The finished turns on the branch ending at `base`, oldest first."""
    found: list[RunRecord] = []
    turn = base
    while turn is not None and len(found) < len(view.runs):
        found.append(turn)
        turn = view.turn(turn.after_turn)
    return list(reversed(found))
