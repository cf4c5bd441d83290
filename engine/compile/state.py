"""The state every compiled flow carries from step to step (JSON-plain: dicts, lists, scalars).

- `inputs`: the run's inputs, written once by `initial_state`, read-only afterwards;
- `context`: the shared key-value bus; each step merges its outputs in (last write per key wins);
- `messages`: the chat log (`add_messages`: append, same id replaces);
- `results`: one record per finished step, appended in order;
- `loops`: bookkeeping of the control constructs only — loop iteration counts, visit counts of
  `max_visits` steps, foreach position and per-item results, map results. Plain block steps never
  write it. A value of None deletes its key, so finished constructs leave nothing behind.

Every node returns only these keys (tests check it): LangGraph silently drops unknown keys.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

from langgraph.graph.message import add_messages

from engine.core.values import JsonDict

STATE_KEYS = frozenset({"inputs", "context", "messages", "results", "loops"})


def merge(current: JsonDict | None, update: JsonDict | None) -> JsonDict:
    """Shallow merge: keys of `update` replace those of `current`."""
    if not update:
        return current or {}
    if not current:
        return dict(update)
    return {**current, **update}


def merge_or_delete(current: JsonDict | None, update: JsonDict | None) -> JsonDict:
    """Like `merge`, but a None value removes its key."""
    result = dict(current or {})
    for key, value in (update or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


class State(TypedDict, total=False):
    inputs: JsonDict
    context: Annotated[JsonDict, merge]
    messages: Annotated[list[Any], add_messages]
    results: Annotated[list[JsonDict], operator.add]
    loops: Annotated[JsonDict, merge_or_delete]


def record(
    step: str, block: str | None, outputs: JsonDict, status: str = "ok", **extra: Any
) -> JsonDict:
    """One `results` entry."""
    return {"step": step, "block": block, "outputs": outputs, "status": status, **extra}


def applied(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`state` as a step's `update` leaves it (the reducers of `State`), for what runs after the step
    in the same node: a router or loop check run inline by the step before it (`GraphBuilder.follower`:
    a router after an agent step sees the agent's messages), the steps run inside one node
    (engine/compile/inline.py)."""
    after = dict(state)
    if "context" in update:
        after["context"] = merge(state.get("context"), update["context"])
    if "results" in update:
        after["results"] = [*(state.get("results") or ()), *update["results"]]
    if "loops" in update:
        after["loops"] = merge_or_delete(state.get("loops"), update["loops"])
    if "messages" in update:
        # add_messages gives new messages their ids in place: the update keeps them
        after["messages"] = add_messages(state.get("messages") or [], update["messages"])
    return after


def combined(first: dict[str, Any], then: Mapping[str, Any] | None) -> dict[str, Any]:
    """One node's update made of a step's `first` and its inline follower's `then`, as if they
    had been two steps: lists append, mappings merge (None values kept for `loops` deletes)."""
    result = dict(first)
    for key, value in (then or {}).items():
        if key in result:
            result[key] = (
                [*result[key], *value] if isinstance(value, list) else {**result[key], **value}
            )
        else:
            result[key] = value
    return result
