"""A thread's state as LangGraph shows it: `values` (the latest turn's inputs and outputs, the conversation as
`messages`), `next`, `tasks` with their `interrupts`, and one checkpoint per turn for the history.

Everything is read in one transaction from Blockyard's own tables — the thread, its runs, its messages and,
while it waits at a gate, the trace of its latest turn — never from LangGraph's checkpoints: a checkpoint
id here is the id of the turn (run) the state is after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.events import APPROVAL_REQUIRED, RUN_STARTED, RunStatus
from engine.serve.langgraph_api import messages as lc
from engine.serve.langgraph_api.interrupts import interrupt
from engine.serve.langgraph_api.shapes import iso, thread_status
from engine.state import store, threads
from engine.state.database import Connection
from engine.state.messages import MAX_PAGE, Message, history
from engine.state.store import RunRecord, effective_status

RUNS_READ = 1000  # turns of one thread read for its state and history


@dataclass
class ThreadView:
    """What one read of a thread found."""

    thread: threads.Thread
    metadata: dict[str, Any]
    runs: list[RunRecord]  # newest first
    messages: list[Message]  # oldest first (the last MAX_PAGE)
    # the approval_required data of a waiting turn
    gates: list[dict[str, Any]] = field(default_factory=list)
    # runs of the thread cancelled before their turn began (runs.py, `cancel`): runs, not turns, newest first
    cancelled: list[RunRecord] = field(default_factory=list)

    @property
    def last(self) -> RunRecord | None:
        return self.runs[0] if self.runs else None

    @property
    def last_status(self) -> str | None:
        return effective_status(self.last) if self.last is not None else None


def read(conn: Connection, thread_id: str) -> ThreadView | None:
    thread = threads.get_thread(conn, thread_id)
    if thread is None:
        return None
    runs = store.list_runs(conn, thread=thread_id, limit=RUNS_READ)
    turns = [
        run for run in runs if run.started is not None
    ]  # a turn of a thread is recorded started
    view = ThreadView(
        thread,
        threads.metadata_of(conn, [thread_id]).get(thread_id, {}),
        turns,
        history(conn, thread_id, limit=MAX_PAGE, newest=True),
        cancelled=[run for run in runs if run.started is None],
    )
    if view.last is not None and view.last_status == RunStatus.WAITING:
        view.gates = waiting_gates(
            [event.as_dict() for event in store.load_events(conn, view.last.id)]
        )
    return view


def waiting_gates(events: list[Any]) -> list[dict[str, Any]]:
    """The approval_required data of a run's latest execution: one per gate it waits at."""
    found: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == RUN_STARTED:
            found = []
        elif event["type"] == APPROVAL_REQUIRED:
            found.append(dict(event.get("data") or {}))
    return found


def metadata(view: ThreadView) -> dict[str, Any]:
    """The thread's metadata: what clients gave it, and the flow it talks to as `graph_id` and `assistant_id`
    (the keys chat UIs search their threads by)."""
    flow = view.thread.flow
    return {**({"graph_id": flow, "assistant_id": flow} if flow else {}), **view.metadata}


def _messages_until(view: ThreadView, run: RunRecord | None) -> list[dict[str, Any]]:
    """The conversation as it stood after `run` (the latest turn: None): its finished turns, and a turn that
    did not finish as its human message. An AI message carries its turn's usage (the run's totals)."""
    turns = {r.id: r for r in view.runs}

    def shown_as(message: Message) -> dict[str, Any]:
        turn = turns.get(message.run_id)
        return lc.from_row(message, lc.spend_of(turn) if turn is not None else None)

    if run is None:
        shown = [shown_as(message) for message in view.messages]
        pending = view.last
    else:
        position = {r.id: n for n, r in enumerate(reversed(view.runs))}
        upto = position[run.id]
        shown = [shown_as(m) for m in view.messages if position.get(m.run_id, -1) <= upto]
        pending = run
    if pending is not None and effective_status(pending) != RunStatus.FINISHED:
        shown.append(lc.human(threads.turn_text(pending.inputs), lc.human_id(pending.id)))
    return shown


def values(view: ThreadView, run: RunRecord | None = None) -> dict[str, Any]:
    """The state's values after `run` (default: the latest turn): its inputs and outputs, and `messages`."""
    turn = run if run is not None else view.last
    found: dict[str, Any] = {}
    if turn is not None:
        found.update(turn.inputs)
        found.update(turn.outputs or {})
    found["messages"] = _messages_until(view, run)
    return found


def interrupts(view: ThreadView) -> list[dict[str, Any]]:
    return [interrupt(gate) for gate in view.gates]


def _checkpoint(thread_id: str, run: RunRecord | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": run.id,
        "checkpoint_map": None,
    }


def state(view: ThreadView, run: RunRecord | None = None) -> dict[str, Any]:
    """The state after `run` (default: the latest turn), as GET /threads/{id}/state answers it."""
    turn = run if run is not None else view.last
    thread_id = view.thread.id
    latest = turn is not None and turn is view.last
    tasks: list[dict[str, Any]] = []
    if latest and view.gates:
        tasks = [
            {
                "id": found["id"],
                "name": str(gate.get("value", {}).get("step") or "approval")
                if isinstance(gate.get("value"), dict)
                else "approval",
                "error": None,
                "interrupts": [found],
                "checkpoint": None,
                "state": None,
                "result": None,
            }
            for gate, found in zip(view.gates, interrupts(view), strict=True)
        ]
    elif turn is not None and effective_status(turn) == RunStatus.FAILED:
        tasks = [
            {
                "id": turn.id,
                "name": turn.error_step or turn.flow,
                "error": turn.error,
                "interrupts": [],
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        ]
    older = (
        view.runs[view.runs.index(turn) + 1]
        if turn is not None and view.runs.index(turn) + 1 < len(view.runs)
        else None
    )
    return {
        "values": values(view, run),
        "next": [task["name"] for task in tasks if task["interrupts"]],
        "tasks": tasks,
        "checkpoint": _checkpoint(thread_id, turn)
        or {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": None,
            "checkpoint_map": None,
        },
        "metadata": {
            **metadata(view),
            "run_id": turn.id if turn else None,
            "source": "loop",
            "step": len(view.runs) - view.runs.index(turn) if turn else -1,
        },
        "created_at": iso(turn.finished or turn.started or turn.created)
        if turn
        else iso(view.thread.created),
        "parent_checkpoint": _checkpoint(thread_id, older),
        "interrupts": [task["interrupts"][0] for task in tasks if task["interrupts"]],
    }


def states(view: ThreadView, *, limit: int, before: str | None = None) -> list[dict[str, Any]]:
    """The thread's history: its state after each turn, newest first (before the turn `before`, when given)."""
    runs = view.runs
    if before is not None:
        ids = [run.id for run in runs]
        runs = runs[ids.index(before) + 1 :] if before in ids else []
    return [state(view, run if run is not view.last else None) for run in runs[:limit]]


def thread(view: ThreadView, busy: bool) -> dict[str, Any]:
    """The thread as LangGraph shows one (POST /threads, GET /threads/{id}, POST /threads/search)."""
    found = interrupts(view)
    return {
        "thread_id": view.thread.id,
        "created_at": iso(view.thread.created),
        "updated_at": iso(view.thread.updated),
        "metadata": metadata(view),
        "status": thread_status(view.last_status, busy),
        "values": values(view),
        "interrupts": {item["id"]: [item] for item in found},
        "config": {},
    }
