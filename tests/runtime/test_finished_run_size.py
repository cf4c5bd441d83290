"""What a run keeps in the state database once it ends (docs/runtime.md, "What a finished run keeps"):
a finished run its trace and, when LangGraph's loop ran it, its last checkpoint (compressed on
SQLite) — at most 20 KB for a 50-step chain —, a stopped run what a resume goes on from. Counted in
the checkpoint tables, not timed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine import Yard
from engine.core.events import RunStatus
from tests.runtime.conftest import BLOCKS, CONFIG, FLOWS
from tests.support.state import checkpoint_tables, state_db

CHAIN = (
    "\n".join(
        [
            "flow: chain50",
            "inputs: {n: {type: integer}}",
            "outputs: [n]",
            "steps:",
            '  - {id: s0, uses: inc, with: {n: "{{ inputs.n }}"}}',
            *[f"  - {{id: s{i}, uses: inc}}" for i in range(1, 50)],
        ]
    )
    + "\n"
)
# a failure after ten finished steps: each of them left a checkpoint before the failing one
LONG_FRAGILE = (
    "\n".join(
        [
            "flow: long_fragile",
            "outputs: [n, echo]",
            "steps:",
            '  - {id: s0, uses: inc, with: {n: "{{ 0 }}"}}',
            *[f"  - {{id: s{i}, uses: inc}}" for i in range(1, 10)],
            '  - {id: boom, uses: explode, with: {text: "n={{ context.n }}"}}',
        ]
    )
    + "\n"
)


def _yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(
        {
            **BLOCKS,
            **FLOWS,
            **CONFIG,
            "flows/chain50.yaml": CHAIN,
            # step by step: LangGraph's loop and checkpoints (`inline: false`)
            "flows/stepwise50.yaml": CHAIN.replace(
                "flow: chain50", "flow: stepwise50\ninline: false"
            ),
            "flows/long_fragile.yaml": LONG_FRAGILE,
        }
    )


def _rows(root: Path, run_id: str) -> dict[str, int]:
    """Rows of each checkpoint table that belong to the run's thread."""
    with state_db(root) as conn:
        return {
            table: int(
                conn.execute(
                    f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?", (run_id,)
                ).fetchone()[0]
            )
            for table in checkpoint_tables(root)
        }


def _root_checkpoints(root: Path, run_id: str) -> int:
    with state_db(root) as conn:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''",
                (run_id,),
            ).fetchone()[0]
        )


def _stored_bytes(root: Path, run_id: str) -> int:
    """The bytes the run's rows hold: its checkpoints and pending writes, its trace, its runs row."""
    if checkpoint_tables(root) == ("checkpoints", "writes"):
        queries = {
            "checkpoints": "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata) + LENGTH(checkpoint_id) "
            "+ LENGTH(thread_id)), 0) FROM checkpoints WHERE thread_id = ?",
            "writes": "SELECT COALESCE(SUM(LENGTH(value) + LENGTH(channel) + LENGTH(task_id)), 0) FROM writes "
            "WHERE thread_id = ?",
        }
    else:  # Postgres: the rows as stored (large values compressed by Postgres itself)
        queries = {
            table: f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {table} t WHERE thread_id = ?"
            for table in checkpoint_tables(root)
        }
    queries["events"] = (
        "SELECT COALESCE(SUM(LENGTH(run_id) + LENGTH(type) + LENGTH(COALESCE(step, '')) "
        "+ LENGTH(time) + LENGTH(data) + 8), 0) FROM events WHERE run_id = ?"
    )
    queries["runs"] = (
        "SELECT LENGTH(id) + LENGTH(flow) + LENGTH(inputs) + LENGTH(COALESCE(outputs, '')) + "
        "LENGTH(digest) + 120 FROM runs WHERE id = ?"
    )
    with state_db(root) as conn:
        return sum(int(conn.execute(sql, (run_id,)).fetchone()[0]) for sql in queries.values())


def test_a_finished_chain50_run_keeps_at_most_20_kb_and_langgraphs_one_checkpoint(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = _yard(make_yard)
    with Yard.load(root) as yard:
        # run without LangGraph's loop (engine/runtime/direct_runs.py): its rows were all a resume
        # needed, and they go as it ends
        result = yard.run("chain50", {"n": 0})
        assert result.ok and result.outputs == {"n": 50}
        # step by step: what stays is what LangGraph reads as the finished run's state
        stepwise = yard.run("stepwise50", {"n": 0})
        assert stepwise.ok and stepwise.outputs == {"n": 50}
        compiled = yard.engine.compiled(yard.bundle("stepwise50"))
        state = compiled.graph.get_state({"configurable": {"thread_id": stepwise.run_id}})
        assert state.next == () and len(state.values["results"]) == 50
        assert state.values["context"]["n"] == 50
    rows = _rows(root, result.run_id)
    assert set(rows.values()) == {0}, rows
    rows = _rows(root, stepwise.run_id)
    assert rows["checkpoints"] == 1, rows  # 52 before: one per step, the input and the start
    assert sum(count for table, count in rows.items() if table.endswith("writes")) == 0, rows
    for run in (result, stepwise):
        assert _stored_bytes(root, run.run_id) <= 20_000


def test_a_failed_run_keeps_only_what_its_resume_needs_and_still_resumes(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = _yard(make_yard)
    with Yard.load(root) as yard:
        failed = yard.run("long_fragile")
        assert failed.status == RunStatus.FAILED and failed.step == "boom"
        # 12 before LangGraph's checkpoints were pruned (the ten steps, the input, the start), then
        # one; run without LangGraph's loop, none: the rows of the ten steps are what it goes on from
        assert _root_checkpoints(root, failed.run_id) == 0
        with state_db(root) as conn:
            kept = conn.execute(
                "SELECT COUNT(*) FROM inline_steps WHERE thread_id = ?", (failed.run_id,)
            ).fetchone()
        assert int(kept[0]) == 10
        (root / "fixed.flag").write_text("")
        started = [e.step for e in yard.events(failed.run_id) if e.type == "step_started"]
        done = yard.resume(failed.run_id)
        assert done.ok, done.error
        assert done.outputs == {"n": 10, "echo": "n=10!"}
        again = [e.step for e in yard.events(failed.run_id) if e.type == "step_started"][
            len(started) :
        ]
        assert again == ["boom"]  # the ten finished steps are not run again
    assert set(_rows(root, failed.run_id).values()) == {0}


def test_a_run_waiting_at_a_gate_is_decided_after_pruning(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = _yard(make_yard)
    with Yard.load(root) as yard:
        waiting = yard.run("gated", {"n": 4})
        assert waiting.status == RunStatus.WAITING
        assert _root_checkpoints(root, waiting.run_id) == 1
        done = yard.resume(waiting.run_id, approve=True)
        assert done.ok and done.outputs == {"n": 6}
