"""Fencing: a server replica writes a run's checkpoints and trace only while it still owns the run.

A replica that stalls for longer than its lease (a paused VM, SIGSTOP, a long GC) loses its runs:
another replica takes them over from their last checkpoint (docs/postgres.md, "Replicas"). When the
stalled one wakes up, its executions of those runs must not write another step. So every write an
execution makes on a replica carries a guard (`store.fence`): a conditional UPDATE of the run's row
— `WHERE id = ? AND owner_replica = <this replica> AND status = 'running'` — in the same
transaction as the write, which the writer fails, with the statements it travels with, when it
changed no row (`GuardFailed`, engine/state/writer.py). The UPDATE takes the row's lock, so it is
ordered with the take-over's claim: either the write commits before the claim (the taking replica
then resumes from it) or it is refused. The guard also pushes the run's lease ahead: a write is a
sign of life. A process that is no replica (`blockyard run`, `resume`) holds no lease that could
run out; its writes carry no guard.

The execution's own writes (its trace rows, its end) take the guard explicitly; the checkpointer's
writes, made inside LangGraph, find it in a context variable that the execution sets for the
graph's task (`enter`).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.state import liveness, store
from engine.state.writer import GuardFailed, Write


@dataclass
class Fence:
    """The guard of one execution of run `run_id` on `replica`; `lost` once a guarded write was refused."""

    run_id: str
    replica: liveness.Replica
    lost: bool = field(default=False)
    _guard: Write | None = field(default=None, repr=False)
    _renew_at: float = field(default=0.0, repr=False)

    def write(self) -> Write:
        """The guard, pushing the lease to `lease_seconds` from now. The same one for a tenth of the
        lease: the writer checks identical guards of a transaction once (engine/state/writer.py), and
        the lease a write leaves is still at least 0.9 of it ahead (the heartbeat renews it fully)."""
        now = time.monotonic()
        guard = self._guard
        if guard is None or now >= self._renew_at:
            guard = self._guard = store.fence(
                self.run_id, self.replica.id, self.replica.lease_until()
            )
            self._renew_at = now + self.replica.lease_seconds / 10
        return guard

    def guarded(self, writes: Sequence[Write]) -> list[Write]:
        return [self.write(), *writes]


class LeaseLost(Exception):
    """This replica no longer owns the run it was executing: another one took it over."""


_FENCE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar(
    "blockyard_fence", default=None
)


def for_run(run_id: str) -> Fence | None:
    """The fence of an execution of `run_id` in this process: None unless this process is a replica."""
    replica = liveness.replica()
    return Fence(run_id, replica) if replica is not None else None


def enter(fence: Fence | None) -> None:
    """Guard the checkpointer's writes in this task (and the tasks it starts) with `fence`."""
    _FENCE.set(fence)


def current() -> Fence | None:
    return _FENCE.get()


def guarded(writes: Sequence[Write]) -> list[Write]:
    """`writes` with the current task's guard in front, if any."""
    fence = _FENCE.get()
    return fence.guarded(writes) if fence is not None else list(writes)


def refused(exc: BaseException, fence: Fence | None) -> bool:
    """Whether `exc` (or what caused it) is a guarded write refused to `fence`; marks it lost."""
    if fence is None:
        return False
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current_exc = pending.pop()
        if current_exc is None or id(current_exc) in seen:
            continue
        seen.add(id(current_exc))
        if isinstance(current_exc, GuardFailed | LeaseLost):
            fence.lost = True
            return True
        pending.extend([current_exc.__cause__, current_exc.__context__])
        if isinstance(current_exc, BaseExceptionGroup):
            pending.extend(current_exc.exceptions)
    return fence.lost
