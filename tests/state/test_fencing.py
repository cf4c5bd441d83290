"""A replica's fence (engine/state/fencing.py): the guard its writes for a run carry."""

from __future__ import annotations

import time

from engine.state import fencing, liveness


def test_a_fence_hands_out_one_guard_for_a_tenth_of_the_lease() -> None:
    # identical guards in one transaction are checked once (engine/state/writer.py)
    fence = fencing.Fence("run-1", liveness.Replica("replica-a", lease_seconds=0.5))
    first = fence.write()
    assert fence.write() is first
    lease_until = first.params[0]
    assert lease_until >= time.time() + 0.4
    time.sleep(0.06)  # a tenth of the lease later: a new guard, the lease pushed ahead again
    again = fence.write()
    assert again is not first and again.params[0] > lease_until
    assert again.params[1:] == ("run-1", "replica-a")
