"""A step's `step_finished` row is committed with the checkpoint that holds the step's result, never
before it: a crash in between would leave a trace saying the step finished, and the resume (or a
replica taking the run over) would run it again (engine/state/durable.py, `hold_trace`)."""

from __future__ import annotations

from pathlib import Path

from langgraph.checkpoint.base import empty_checkpoint

from engine.core.events import STEP_FINISHED, STEP_STARTED, Event, now_iso
from engine.state import store
from engine.state.checkpointer import StateDB
from engine.state.location import locate
from engine.state.writer import Write


def _row(seq: int, type_: str, step: str) -> Write:
    return store.insert_events([Event(type_, "r1", seq, step, now_iso(), {})])


def _stored(db: StateDB) -> list[tuple[int, str]]:
    return [
        (event.seq, event.type) for event in db.read(lambda conn: store.load_events(conn, "r1"))
    ]


def test_a_finished_step_is_stored_with_its_checkpoint_and_the_rows_after_it_in_order(
    tmp_path: Path,
) -> None:
    db = StateDB(locate(tmp_path / "state.db"))  # the suite's backend: the file, or Postgres
    try:
        # not holding: lazy
        assert db.saver.hold_trace("r1", _row(1, STEP_STARTED, "a"), begin=False) is False
        db.writer.write_sync(_row(1, STEP_STARTED, "a"))
        assert db.saver.hold_trace("r1", _row(2, STEP_FINISHED, "a"), begin=True) is True
        # after it: held too
        assert db.saver.hold_trace("r1", _row(3, STEP_STARTED, "b"), begin=False) is True
        db.writer.write_sync()  # another run's commit carries nothing of these
        assert _stored(db) == [(1, STEP_STARTED)]
        config = {"configurable": {"thread_id": "r1", "checkpoint_ns": ""}}
        db.saver.put(config, empty_checkpoint(), {"source": "loop", "step": 1, "parents": {}}, {})  # type: ignore[arg-type]
        assert _stored(db) == [(1, STEP_STARTED), (2, STEP_FINISHED), (3, STEP_STARTED)]
        assert db.saver.get_tuple(config) is not None  # type: ignore[arg-type]
        # holding ended
        assert db.saver.hold_trace("r1", _row(4, STEP_STARTED, "b"), begin=False) is False
    finally:
        db.close()
