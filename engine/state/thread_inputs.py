"""A thread's written inputs: values of its flow's declared inputs that a client wrote (the LangGraph API's
`POST /threads/{id}/state`, docs/langgraph-api.md "Writing a thread's state"). Each later turn of the
thread takes them for the inputs its run does not give (a run's own values win; the flow's defaults
apply to the rest): engine/runtime/engine.py and engine/serve/server.py merge them before a turn's
inputs are checked.

Kept on the thread's row (`threads.inputs`, JSON, migration 16): the values in effect, when they were
last written, and the record of the writes themselves — when, by what, with which values — the latest
KEPT_WRITES of them, so that a thread never changes without a trace of who changed it. A null value
removes the input's written value (the flow's default applies again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.core.values import JsonDict
from engine.state.database import Connection
from engine.state.store import dumps
from engine.state.threads import Busy, busy_turn

KEPT_WRITES = 100  # writes recorded per thread, the latest ones


@dataclass(frozen=True)
class Written:
    """A thread's written inputs: `values` in effect, `updated` when last written (None: never),
    `writes` the record of the writes, oldest first: {time, by, as_node, values}."""

    values: JsonDict = field(default_factory=dict)
    updated: str | None = None
    writes: list[JsonDict] = field(default_factory=list)

    def as_dict(self) -> JsonDict:
        return {"values": dict(self.values), "updated": self.updated, "writes": list(self.writes)}


NONE = Written()


def _parse(text: str | None) -> Written:
    if not text:
        return NONE
    kept = json.loads(text)
    return Written(
        dict(kept.get("values") or {}), kept.get("updated"), list(kept.get("writes") or [])
    )


def read(conn: Connection, thread_id: str) -> Written:
    """The written inputs of `thread_id` (NONE for a thread without, or no such thread)."""
    row = conn.execute("SELECT inputs FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return _parse(row[0]) if row is not None else NONE


def write(
    thread_id: str, values: Mapping[str, Any], by: str, as_node: str | None, now: str
) -> Callable[[Connection], Written | Busy]:
    """A writer call: `values` written over the thread's (a null removes one), the write recorded; Busy
    while a turn of the thread goes on or waits at a gate (what it will run with is its own by then)."""

    def apply(conn: Connection) -> Written | Busy:
        held = busy_turn(conn, thread_id)
        if held is not None:
            return held
        before = read(conn, thread_id)
        kept = dict(before.values)
        for key, value in values.items():
            if value is None:
                kept.pop(key, None)
            else:
                kept[key] = value
        record = {"time": now, "by": by, "as_node": as_node, "values": dict(values)}
        written = Written(kept, now, [*before.writes, record][-KEPT_WRITES:])
        conn.execute(
            "UPDATE threads SET inputs = ?, updated = ? WHERE id = ?",
            (dumps(written.as_dict()), now, thread_id),
        )
        return written

    return apply


def under(
    written: Mapping[str, Any], given: Mapping[str, Any] | None, declared: Mapping[str, Any]
) -> JsonDict:
    """A turn's inputs: what its run gives, over the thread's written values of the inputs the flow still
    declares (a value written for an input the flow no longer has is left out)."""
    return {
        **{key: value for key, value in written.items() if key in declared},
        **dict(given or {}),
    }
