"""A replica's fence (engine/state/fencing.py): its guard goes with every write of its execution of a run,
and once another replica took the run over, those writes are refused and the execution knows it lost the
run — on a real state database; the guard's reuse, the task's fence and the refusals it recognises."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.events import RunStatus
from engine.state import fencing, liveness, store
from engine.state.checkpointer import StateDB
from engine.state.location import locate
from engine.state.writer import GuardFailed, Write

RUN = "run-1"
NOW = "2026-01-01T00:00:00.000Z"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[StateDB]:
    state = StateDB(locate(tmp_path / "state.db"))
    try:
        # its definition first: Postgres enforces the runs -> definitions foreign key
        state.writer.write_sync(store.save_definition("digest", "f", 1, "{}", NOW))
        state.writer.write_sync(
            store.insert_run(
                store.RunRecord(
                    RUN,
                    "f",
                    1,
                    "digest",
                    RunStatus.RUNNING,
                    {},
                    created=NOW,
                    owner_replica="replica-a",
                    lease_until=time.time() + 30,
                )
            )
        )
        yield state
    finally:
        state.close()


def budget(db: StateDB) -> object:
    record = db.read(lambda conn: store.get_run(conn, RUN))
    assert record is not None
    return record.budget


def test_the_owner_writes_and_pushes_its_lease_a_replica_that_lost_the_run_writes_nothing(
    db: StateDB,
) -> None:
    a = fencing.Fence(RUN, liveness.Replica("replica-a", 60.0))
    db.writer.write_sync(*a.guarded([store.set_budget(RUN, {"tokens": 1})]))
    record = db.read(lambda conn: store.get_run(conn, RUN))
    assert record is not None and record.budget == {"tokens": 1}
    # pushed to ~60 s ahead
    assert record.lease_until is not None and record.lease_until > time.time() + 50
    # replica B takes the run over (A stalled past its lease); A wakes up and writes again
    db.writer.write_sync(Write("UPDATE runs SET owner_replica = 'replica-b' WHERE id = ?", (RUN,)))
    with pytest.raises(
        GuardFailed, match=r"^UPDATE runs SET lease_until = \? WHERE id = \? AND owner_replica = \?"
    ) as refused:  # the guard that changed no row
        db.writer.write_sync(*a.guarded([store.set_budget(RUN, {"tokens": 2})]))
    assert budget(db) == {
        "tokens": 1
    }  # the statement that travelled with the guard was not written
    assert not a.lost and fencing.refused(refused.value, a) and a.lost


def test_a_guard_is_reused_for_a_tenth_of_the_lease_then_renewed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    # the clock the fence reads, for this test only
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    fence = fencing.Fence(RUN, liveness.Replica("replica-a", 10.0))
    before = time.time()
    first = fence.write()
    assert first.guard and first.params[1:] == (RUN, "replica-a")
    # the lease, pushed a whole lease ahead
    assert before + 10.0 <= first.params[0] <= time.time() + 10.0
    clock[0] = 100.99
    assert fence.write() is first
    clock[0] = 101.0  # a tenth of the lease: a new guard
    second = fence.write()
    assert second is not first and second.params[0] >= first.params[0]
    clock[0] = 101.99
    assert fence.write() is second
    assert fence.guarded([first]) == [second, first]


def test_the_fence_of_a_task_guards_its_writes_and_those_of_the_tasks_it_starts() -> None:
    fence = fencing.Fence(RUN, liveness.Replica("replica-a", 10.0))
    plain = Write("SELECT 1")

    async def execution() -> tuple[list[Write], list[Write], fencing.Fence | None]:
        fencing.enter(fence)

        async def inner() -> list[Write]:
            return fencing.guarded([plain])

        return fencing.guarded([plain]), await asyncio.create_task(inner()), fencing.current()

    mine, child, current = contextvars.copy_context().run(asyncio.run, execution())
    assert mine == child == [fence.write(), plain] and current is fence
    # elsewhere (no replica's execution): no guard
    assert fencing.current() is None and fencing.guarded([plain]) == [plain]
    fencing.enter(None)
    assert fencing.guarded((plain,)) == [plain]


def test_a_refusal_is_recognised_however_it_arrives() -> None:
    def fence() -> fencing.Fence:
        return fencing.Fence(RUN, liveness.Replica("replica-a", 10.0))

    def caused(
        inner: BaseException, outer: BaseException, *, context: bool = False
    ) -> BaseException:
        if context:
            outer.__context__ = inner
        else:
            outer.__cause__ = inner
        return outer

    for exc in (
        GuardFailed("no row"),
        fencing.LeaseLost("taken"),
        caused(GuardFailed("no row"), RuntimeError("writing failed")),
        caused(GuardFailed("no row"), RuntimeError("writing failed"), context=True),
        caused(caused(fencing.LeaseLost("taken"), ValueError("x")), RuntimeError("y")),
        ExceptionGroup("tasks", [ValueError("other"), GuardFailed("no row")]),
    ):
        mine = fence()
        assert fencing.refused(exc, mine), exc
        assert mine.lost
    other = fence()
    assert not fencing.refused(RuntimeError("disk full"), other) and not other.lost
    looped = RuntimeError("a")
    looped.__cause__ = ValueError("b")
    looped.__cause__.__context__ = looped  # a cycle of causes ends the walk, not the process
    assert not fencing.refused(looped, other)
    other.lost = True  # once lost, every later failure of the execution is that loss
    assert fencing.refused(RuntimeError("disk full"), other)
    assert not fencing.refused(GuardFailed("no row"), None)  # not a replica: nothing to lose


def test_only_a_replica_fences_its_runs() -> None:
    assert liveness.replica() is None and fencing.for_run(RUN) is None
    try:
        replica = liveness.join_as_replica(12.0)
        fence = fencing.for_run(RUN)
        assert fence is not None and (fence.run_id, fence.replica, fence.lost) == (
            RUN,
            replica,
            False,
        )
    finally:
        liveness.leave()
    assert fencing.for_run(RUN) is None
