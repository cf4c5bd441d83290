"""Who owns a running run, and whether it still lives (engine/state/liveness.py), told from real processes:
a live child, one killed and not yet reaped, one reaped, one whose pid came back with another start time,
one whose command name holds a parenthesis and bytes that are not UTF-8, and owners on another host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.state import liveness


def _boot_time() -> float:
    """When the machine booted (seconds since the epoch), from /proc/stat's `btime`."""
    for line in Path("/proc/stat").read_text(encoding="utf-8").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise AssertionError("/proc/stat has no btime")


@pytest.fixture
def child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A Python child that sleeps, started through a link whose name has a ')' and bytes that are not
    UTF-8: the kernel shows that name, cut to 15 bytes, in /proc/PID/stat."""
    odd = os.path.join(os.fsencode(tmp_path), b"a) b(\xff\xfe")
    os.symlink(sys.executable, odd)
    process = subprocess.Popen([odd, "-c", "import time; time.sleep(60)"])
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=30)


def test_the_start_time_is_the_one_the_kernel_counts_since_boot(
    child: subprocess.Popen[bytes],
) -> None:
    began = time.time()
    raw = Path(f"/proc/{child.pid}/stat").read_bytes()
    # the odd name is there
    assert b")" in raw[raw.index(b"(") + 1 : raw.rindex(b")")] and b"\xff" in raw
    start = liveness._start_time(child.pid)
    assert start is not None and start.isdigit()
    # clock ticks since boot -> the moment the child started: just now (field 22 of proc(5), no other)
    started = _boot_time() + int(start) / os.sysconf("SC_CLK_TCK")
    assert began - 5 < started <= time.time() + 2
    # this process started earlier, at its own time
    assert liveness._start_time(os.getpid()) != start


def test_a_live_owner_is_alive_and_one_with_the_pid_but_another_start_is_not(
    child: subprocess.Popen[bytes],
) -> None:
    host = liveness.host_name()
    start = liveness._start_time(child.pid)
    assert liveness.is_alive(child.pid, host, start)
    assert liveness.is_alive(child.pid, host, None)  # no start recorded: the pid alone
    # the pid came back, another process
    assert not liveness.is_alive(child.pid, host, str(int(start or "0") + 1))
    assert child.poll() is None  # asking did not touch it


def test_a_killed_owner_is_dead_before_and_after_it_is_reaped(
    child: subprocess.Popen[bytes],
) -> None:
    host = liveness.host_name()
    start = liveness._start_time(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z":
        assert time.monotonic() < deadline, "the killed child never became a zombie"
        time.sleep(0.01)
    # a zombie: killed, not yet reaped by its parent
    assert not liveness.is_alive(child.pid, host, start)
    assert not liveness.is_alive(child.pid, host, None)
    child.wait(timeout=30)
    assert not liveness.is_alive(child.pid, host, start)  # reaped: no such process
    assert liveness._start_time(child.pid) is None


def test_no_owner_is_not_alive() -> None:
    assert not liveness.is_alive(None, liveness.host_name(), None)
    assert not liveness.is_alive(None, "elsewhere", None, "replica-b", time.time() + 60)


def test_on_another_host_only_a_replica_whose_lease_ran_out_is_dead() -> None:
    now = time.time()
    assert liveness.is_alive(1, "elsewhere", "1")  # a plain process there: presumed alive
    assert liveness.is_alive(1, "elsewhere", "1", "replica-b", None)  # a replica without a lease
    assert liveness.is_alive(1, "elsewhere", "1", "replica-b", now + 60)
    assert not liveness.is_alive(1, "elsewhere", "1", "replica-b", now - 1)
    assert not liveness.is_alive(1, "elsewhere", "1", "replica-b", now - 0.01)


def test_a_lease_that_runs_out_this_very_moment_still_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the clock liveness reads, for this block only
    monkeypatch.setattr(time, "time", lambda: 1000.0)
    assert liveness.is_alive(1, "elsewhere", "1", "replica-b", 1000.0)
    assert not liveness.is_alive(1, "elsewhere", "1", "replica-b", 999.999)


def test_without_proc_an_existing_pid_is_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    # a system without /proc (the pid's stat cannot be read): the process exists, so it is alive
    monkeypatch.setattr(liveness, "_proc_stat", lambda pid: None)
    assert liveness.is_alive(os.getpid(), liveness.host_name(), "12345")


def test_this_process_is_an_owner_and_a_replica_only_once_it_joined() -> None:
    me = liveness.current()
    assert (me.pid, me.host, me.replica, me.lease_until) == (
        os.getpid(),
        liveness.host_name(),
        None,
        None,
    )
    assert me.start == liveness._start_time(os.getpid()) and me.start is not None
    assert liveness.replica() is None
    try:
        joined = liveness.join_as_replica(30.0)
        assert liveness.replica() == joined and joined.lease_seconds == 30.0
        assert (
            joined.id.startswith(f"{liveness.host_name()}-{os.getpid()}-")
            and len(joined.id.rsplit("-", 1)[1]) == 8
        )
        before = time.time()
        owner = liveness.current()
        assert (owner.pid, owner.host, owner.start) == (me.pid, me.host, me.start)
        assert owner.replica == joined.id
        assert (
            owner.lease_until is not None
            and before + 30.0 <= owner.lease_until <= time.time() + 30.0
        )
        assert before + 5.0 <= liveness.Replica("r", 5.0).lease_until() <= time.time() + 5.0
        # each server start is a replica of its own
        assert liveness.join_as_replica(30.0).id != joined.id
    finally:
        liveness.leave()
    assert liveness.replica() is None and liveness.current().replica is None
