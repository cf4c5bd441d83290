"""A thread's state as LangGraph shows it: `values` (the latest turn's inputs and outputs, the conversation as
`messages`), `next`, `tasks` with their `interrupts`, and the checkpoints of its history.

Everything is read in one transaction from Blockyard's own tables — the thread, its runs, its messages and,
while it waits at a gate, the trace of its latest turn — never from LangGraph's checkpoints. A turn shows as
two checkpoints, as a LangGraph graph's run makes at least two: its input (`<run id>:in`: the conversation it
went on from and its human message, the turn about to run) and its end (`<run id>`: its reply added); before
every turn is the thread's start (`__start__`, no messages). A turn that regenerated an answer (said an
earlier turn's message again) has only its end, after that turn's input, and says that turn's human
message. Each checkpoint's parent is the one before it on its branch (engine/state/branches.py): a turn's
input follows the end of the turn it went on from, so a thread whose turns went on from earlier ones (an
edited message, a regenerated answer) shows its branches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.events import APPROVAL_REQUIRED, RUN_STARTED, RunStatus
from engine.core.values import JsonDict
from engine.serve.langgraph_api import messages as lc
from engine.serve.langgraph_api import shapes
from engine.serve.langgraph_api.interrupts import interrupt
from engine.serve.langgraph_api.shapes import iso, thread_status
from engine.state import branches, store, thread_inputs, threads
from engine.state.database import Connection
from engine.state.messages import Message
from engine.state.store import RunRecord, effective_status

RUNS_READ = 1000  # turns of one thread read for its state and history
START = branches.START  # the checkpoint before every turn
INPUT = ":in"  # a turn's input checkpoint: its run id and this (no run id holds a colon)


@dataclass
class ThreadView:
    """What one read of a thread found."""

    thread: threads.Thread
    metadata: JsonDict
    runs: list[RunRecord]  # newest first
    messages: dict[str, list[Message]]  # the rows of each finished turn (its message, its reply)
    # the approval_required data of a waiting turn
    gates: list[JsonDict] = field(default_factory=list)
    # runs of the thread cancelled before their turn began (runs.py, `cancel`): runs, not turns, newest first
    cancelled: list[RunRecord] = field(default_factory=list)
    # the inputs a client wrote to the thread (engine/state/thread_inputs.py)
    written: thread_inputs.Written = thread_inputs.NONE

    @property
    def last(self) -> RunRecord | None:
        return self.runs[0] if self.runs else None

    @property
    def last_status(self) -> str | None:
        return effective_status(self.last) if self.last is not None else None

    def turn(self, run_id: str | None) -> RunRecord | None:
        return next((run for run in self.runs if run.id == run_id), None)


def read(conn: Connection, thread_id: str) -> ThreadView | None:
    thread = threads.get_thread(conn, thread_id)
    if thread is None:
        return None
    runs = store.list_runs(conn, thread=thread_id, limit=RUNS_READ)
    turns = [
        run for run in runs if run.started is not None
    ]  # a turn of a thread is recorded started
    rows = conn.execute(
        "SELECT thread_id, idx, role, content, run_id, created FROM messages WHERE thread_id = ? "
        "ORDER BY idx DESC LIMIT ?",
        (thread_id, 2 * RUNS_READ),
    ).fetchall()
    said: dict[str, list[Message]] = {}
    for row in reversed(rows):
        said.setdefault(row[4], []).append(Message(*row))
    view = ThreadView(
        thread,
        threads.metadata_of(conn, [thread_id]).get(thread_id, {}),
        turns,
        said,
        cancelled=[run for run in runs if run.started is None],
        written=thread_inputs.read(conn, thread_id),
    )
    if view.last is not None and view.last_status == RunStatus.WAITING:
        view.gates = waiting_gates(
            [event.as_dict() for event in store.load_events(conn, view.last.id)]
        )
    return view


def waiting_gates(events: list[Any]) -> list[JsonDict]:
    """The approval_required data of a run's latest execution: one per gate it waits at."""
    found: list[JsonDict] = []
    for event in events:
        if event["type"] == RUN_STARTED:
            found = []
        elif event["type"] == APPROVAL_REQUIRED:
            found.append(dict(event.get("data") or {}))
    return found


def metadata(view: ThreadView) -> JsonDict:
    """The thread's metadata: what clients gave it, and the flow it talks to as `graph_id` and `assistant_id`
    (the keys chat UIs search their threads by)."""
    flow = view.thread.flow
    return {**({"graph_id": flow, "assistant_id": flow} if flow else {}), **view.metadata}


def _branch(view: ThreadView, turn: RunRecord | None) -> list[RunRecord]:
    """The finished turns on the branch ending at `turn`, oldest first (as far as the view reaches)."""
    found: list[RunRecord] = []
    while turn is not None and len(found) < len(view.runs):
        found.append(turn)
        turn = view.turn(turn.after_turn)
    return [run for run in reversed(found) if run.id in view.messages]


def origin(view: ThreadView, turn: RunRecord) -> RunRecord:
    """The turn whose message `turn` says: itself, or for a regenerated answer the turn it regenerated
    (and so on, as far as the view reaches)."""
    seen = 0
    while turn.regenerates is not None and seen < len(view.runs):
        earlier = view.turn(turn.regenerates)
        if earlier is None:
            break
        turn, seen = earlier, seen + 1
    return turn


def _human(view: ThreadView, turn: RunRecord, text: str) -> JsonDict:
    """A turn's human message: a regenerated answer's turn says its origin's message, with its id."""
    return lc.human(text, lc.human_id(origin(view, turn).id))


def talk(view: ThreadView, turn: RunRecord | None) -> list[JsonDict]:
    """The conversation on the branch ending at finished turn `turn` (None: none). An AI message carries
    its turn's usage (the run's totals)."""
    return [
        _human(view, run, message.content)
        if message.role == "user"
        else lc.from_row(message, lc.spend_of(run))
        for run in _branch(view, turn)
        for message in view.messages[run.id]
    ]


def _messages_after(view: ThreadView, turn: RunRecord | None) -> list[JsonDict]:
    """The conversation as it stood after `turn`: up to it if it finished, else the talk it went on from
    and its human message."""
    if turn is None:
        return []
    if turn.id in view.messages:
        return talk(view, turn)
    return [
        *talk_before(view, turn),
        _human(view, turn, threads.turn_text(turn.inputs)),
    ]


def talk_before(view: ThreadView, turn: RunRecord) -> list[JsonDict]:
    """The talk `turn` went on from."""
    return talk(view, view.turn(turn.after_turn))


def before_turn(view: ThreadView, after: str | None) -> list[JsonDict]:
    """The conversation a new turn that goes on from `after` (a finished turn, or branches.START; None: the
    thread's latest finished turn) starts with."""
    return talk(view, latest(view) if after is None else view.turn(after))


def latest(view: ThreadView) -> RunRecord | None:
    """The finished turn a plain turn goes on from (engine/state/branches.py, `latest`): the latest turn,
    or the one it went on from when it did not finish."""
    last = view.last
    if last is not None and last.id not in view.messages and last.after_turn is not None:
        return view.turn(last.after_turn)
    return next((run for run in view.runs if run.id in view.messages), None)


def values(view: ThreadView, run: RunRecord | None = None, *, now: bool = False) -> JsonDict:
    """The state's values after `run` (default: the latest turn): its inputs and outputs, and `messages`;
    the thread's state now (no `run`, or `now`) shows the inputs a client wrote since that turn began."""
    turn = run if run is not None else view.last
    found: JsonDict = {}
    if turn is not None:
        found.update(turn.inputs)
        found.update(turn.outputs or {})
    if run is None or now:  # the writes since the turn began, in order (a null: no longer written)
        began = (turn.started or turn.created) if turn is not None else None
        for write in view.written.writes:
            if began is None or str(write.get("time")) >= began:
                for key, value in (write.get("values") or {}).items():
                    if value is None:
                        found.pop(key, None)
                    else:
                        found[key] = value
    found["messages"] = _messages_after(view, turn)
    return found


def interrupts(view: ThreadView) -> list[shapes.Interrupt]:
    return [interrupt(gate) for gate in view.gates]


def _checkpoint(thread_id: str, checkpoint_id: str | None) -> shapes.Checkpoint | None:
    if checkpoint_id is None:
        return None
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "checkpoint_map": None,
    }


def _tasks(view: ThreadView, turn: RunRecord | None) -> list[shapes.Task]:
    """The gates the latest turn waits at, or the step a failed turn failed in."""
    if turn is not None and turn is view.last and view.gates:
        return [
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
    if turn is not None and effective_status(turn) == RunStatus.FAILED:
        return [
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
    return []


def _parent(turn: RunRecord) -> str:
    """The checkpoint a turn's input follows: the end of the turn it went on from, else the start."""
    return turn.after_turn or START


def _snapshot(
    view: ThreadView,
    checkpoint_id: str,
    values_: JsonDict,
    *,
    parent: str | None,
    turn: RunRecord | None,
    step: int,
    created: str | None,
    tasks: list[shapes.Task] | None = None,
    source: str = "loop",
) -> shapes.ThreadState:
    thread_id = view.thread.id
    tasks = tasks or []
    return {
        "values": values_,
        "next": [task["name"] for task in tasks if task["interrupts"]],
        "tasks": tasks,
        "checkpoint": _checkpoint(thread_id, checkpoint_id),
        "metadata": {
            **metadata(view),
            "run_id": turn.id if turn else None,
            "source": source,
            "step": step,
        },
        "created_at": iso(created or view.thread.created),
        "parent_checkpoint": _checkpoint(thread_id, parent),
        "interrupts": [task["interrupts"][0] for task in tasks if task["interrupts"]],
    }


def _depth(view: ThreadView, turn: RunRecord) -> int:
    """How many turns the branch ending at `turn` holds, `turn` included (as far as the view reaches)."""
    depth, seen = 0, view.turn(turn.after_turn)
    while seen is not None and depth < len(view.runs):
        depth, seen = depth + 1, view.turn(seen.after_turn)
    return depth + 1


def state(view: ThreadView, run: RunRecord | None = None) -> shapes.ThreadState:
    """The state after `run` (default: the latest turn), as GET /threads/{id}/state answers it."""
    turn = run if run is not None else view.last
    if turn is None:  # a thread created ahead of its turns: no checkpoint yet
        ahead = start_state(view)
        return {
            **ahead,
            "values": {**ahead["values"], **values(view)},
            "checkpoint": {**_start_checkpoint(view), "checkpoint_id": None},
        }
    return _snapshot(
        view,
        turn.id,
        values(view, turn, now=run is None),
        parent=origin(view, turn).id + INPUT,  # a regenerated answer follows its origin's input
        turn=turn,
        step=2 * _depth(view, turn),
        created=turn.finished or turn.started or turn.created,
        tasks=_tasks(view, turn),
    )


def input_state(view: ThreadView, turn: RunRecord) -> shapes.ThreadState:
    """A turn's input checkpoint: the talk it went on from and its human message, the turn about to run."""
    said = [
        *talk_before(view, turn),
        _human(view, turn, threads.turn_text(turn.inputs)),
    ]
    return {
        **_snapshot(
            view,
            turn.id + INPUT,
            {**turn.inputs, "messages": said},
            parent=_parent(turn),
            turn=turn,
            step=2 * _depth(view, turn) - 1,
            created=turn.started or turn.created,
            source="input",
        ),
        "next": [turn.flow],
    }


def start_state(view: ThreadView) -> shapes.ThreadState:
    """The checkpoint before every turn: no messages."""
    return _snapshot(
        view, START, {"messages": []}, parent=None, turn=None, step=0, created=None, source="input"
    )


def _start_checkpoint(view: ThreadView) -> shapes.Checkpoint:
    found = _checkpoint(view.thread.id, START)
    assert found is not None
    return found


def at(view: ThreadView, checkpoint_id: str) -> shapes.ThreadState | None:
    """The state at one of the thread's checkpoints; None when it has no such checkpoint."""
    if checkpoint_id == START:
        return start_state(view)
    ends_input = checkpoint_id.endswith(INPUT)
    turn = view.turn(checkpoint_id.removesuffix(INPUT) if ends_input else checkpoint_id)
    if turn is None:
        return None
    if ends_input:
        return input_state(view, origin(view, turn))
    return state(view, None if turn is view.last else turn)


def states(view: ThreadView, *, limit: int, before: str | None = None) -> list[shapes.ThreadState]:
    """The thread's history, newest first: each turn's end and input, then the thread's start (the
    checkpoints before `before`, when given)."""
    # a regenerated answer's turn has no input of its own: it follows its origin's
    ids = [
        checkpoint
        for run in view.runs
        for checkpoint in (run.id, *((run.id + INPUT,) if origin(view, run) is run else ()))
    ]
    ids += [START] if ids else []  # a thread with no turns has no history
    if before is not None:
        ids = ids[ids.index(before) + 1 :] if before in ids else []
    found = [at(view, checkpoint) for checkpoint in ids[:limit]]
    return [item for item in found if item is not None]


def thread(view: ThreadView, busy: bool) -> shapes.Thread:
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
