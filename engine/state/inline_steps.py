"""The table of steps finished inside a LangGraph node of a run with checkpoints (migration 10).

A durable run's graph may run several steps one after another in one LangGraph node
(engine/compile/inline.py). LangGraph checkpoints the node's result when the node ends; until then,
each step that finished is a row here, committed before the next step begins (`sync`), so a crash
or a failure loses no finished step: the node, run again by LangGraph on resume (same task, same
checkpoint namespace), goes on after the last row (engine/state/journal.py). Rows are keyed by the
run's checkpoint thread and the namespace of the node's task, which LangGraph derives from the
checkpoint the task started from: a new task never reads an old task's rows.
"""

from __future__ import annotations

from engine.state.writer import Write

TABLE = "inline_steps"
# The `next` of a map fan-out's row whose items the node runs itself: ITEMS + the item node (the row
# holds the fan-out's update and the items' arguments); of an item's row: ITEM + its position. A
# node's name never holds a colon (step ids are names: engine/spec/common.py).
ITEMS = "items:"
ITEM = "item:"
# (thread_id, checkpoint_ns, seq, next, type, value): the step's update serialized as checkpoints are
PUT = (
    f"INSERT OR REPLACE INTO {TABLE} (thread_id, checkpoint_ns, seq, next, type, value) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
READ = f"SELECT checkpoint_ns, seq, next, type, value FROM {TABLE} WHERE thread_id = ? ORDER BY checkpoint_ns, seq"


def delete(thread_id: str) -> Write:
    """Deleting the rows of a thread: its run finished (LangGraph's last checkpoint holds every
    step), or the thread is deleted; a stopped run keeps them, for its resume."""
    return Write(f"DELETE FROM {TABLE} WHERE thread_id = ?", (str(thread_id),))
