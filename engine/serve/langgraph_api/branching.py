"""Where a new turn of a thread starts: the checkpoint a run names (`checkpoint` / `checkpoint_id`), as
useStream's edit and regenerate send it (docs/langgraph-api.md, "Branching threads").

A thread's checkpoints (engine/serve/langgraph_api/state.py) are each turn's end (`<run id>`), each turn's
input (`<run id>:in`) and the thread's start (`__start__`). A turn that starts from:
- no checkpoint, or the end of the thread's latest turn: a plain turn (engine/state/branches.py, `latest`);
- the end of an earlier finished turn: goes on from it (an edited message: a new branch);
- a turn's input, with no input of its own: says that turn's message again from where that turn went on
  (a regenerated answer: a new branch beside it, shown after that same input);
- the start: a new first turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.serve.langgraph_api import state
from engine.serve.langgraph_api.bodies import RunCreate
from engine.serve.problems import ApiError, conflict, not_found
from engine.state.branches import LATEST, TurnStart
from engine.state.store import RunRecord


@dataclass(frozen=True)
class StartPoint:
    """A new turn's start (`branch`), and the turn whose message it says again (a regenerated answer)."""

    branch: TurnStart = LATEST
    again: RunRecord | None = None


def checkpoint_of(body: RunCreate) -> str | None:
    """The checkpoint id a run's body names, if any."""
    given: Any = body.checkpoint_id
    if body.checkpoint is not None and body.checkpoint.get("checkpoint_id") is not None:
        given = body.checkpoint["checkpoint_id"]
    if given is not None and not isinstance(given, str):
        raise ApiError(
            422,
            "invalid_request",
            "checkpoint.checkpoint_id: must be text",
            field="checkpoint",
        )
    return given


def start_point(view: state.ThreadView | None, body: RunCreate) -> StartPoint:
    """Where the body's new turn starts; 404 for a checkpoint the thread does not have, 409 for the end
    of a turn that did not finish, 422 for input sent to a turn's input checkpoint."""
    wanted = checkpoint_of(body)
    if wanted is None:
        return StartPoint()
    if view is None:
        raise ApiError(
            422,
            "invalid_request",
            "a run without a thread has no checkpoint to start from",
            field="checkpoint",
        )
    if wanted == state.START:
        return StartPoint(TurnStart(after=state.START))
    again = wanted.endswith(state.INPUT)
    turn = view.turn(wanted.removesuffix(state.INPUT))
    if turn is None:
        raise not_found(
            "checkpoint",
            f"thread '{view.thread.id}' has no checkpoint '{wanted}' (see its history)",
        )
    if again:
        if body.input:
            raise ApiError(
                422,
                "invalid_request",
                f"checkpoint '{wanted}' is the input of turn {turn.id}: a run from it says that "
                "turn's message again and takes no input (to say something else, start from the "
                "checkpoint before it)",
                field="input",
            )
        said = state.origin(view, turn)  # a regenerated turn's input is its origin's
        return StartPoint(
            TurnStart(after=said.after_turn or state.START, regenerates=said.id), again=said
        )
    if turn is view.last:  # as useStream sends with every submit: a plain turn
        return StartPoint()
    if turn.id not in view.messages:
        raise conflict(
            "turn_unfinished",
            f"turn {turn.id} of thread '{view.thread.id}' did not finish: a turn goes on from a "
            "finished one",
        )
    return StartPoint(TurnStart(after=turn.id))
