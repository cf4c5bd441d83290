"""Which process owns a running run, and whether that process is still alive.

A run whose process died (kill -9, power cut, OOM) stays `running` in the table. We record the
owner's pid, host name and process start time, so another process can tell a live owner from a
dead one (or from an unrelated process that got the same pid later) and let `resume` take over.

A `blockyard serve` replica (several share one Postgres database, docs/postgres.md) also holds a
lease on the runs it executes: its replica id and a time (`lease_until`, seconds since the epoch)
that its heartbeat keeps pushing ahead. A run whose lease ran out is dead wherever its process
was, so another replica can take it over; a process on another host is no longer "presumed
alive" forever.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    start: str | None  # process start time in clock ticks since boot, where the OS tells it
    replica: str | None = None  # a server replica's id, when this process is one
    lease_until: float | None = None  # when its lease on a run it claims now runs out


@dataclass(frozen=True)
class Replica:
    """This process as a server replica: its id, and how long a lease lasts without a heartbeat."""

    id: str
    lease_seconds: float

    def lease_until(self) -> float:
        return time.time() + self.lease_seconds


_replica: Replica | None = None


def join_as_replica(lease_seconds: float) -> Replica:
    """Make this process a replica (`blockyard serve`): the runs it claims from now on carry a lease."""
    global _replica
    _replica = Replica(f"{host_name()}-{os.getpid()}-{uuid.uuid4().hex[:8]}", lease_seconds)
    return _replica


def leave() -> None:
    """This process no longer serves as a replica (the server stopped)."""
    global _replica
    _replica = None


def replica() -> Replica | None:
    return _replica


@cache
def host_name() -> str:
    return socket.gethostname()


def _start_time(pid: int) -> str | None:
    stat = _proc_stat(pid)
    if stat is None:
        return None
    # field 22 (starttime); fields after the command name, which may contain spaces, are split safely
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _proc_stat(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def current() -> Owner:
    """This process (with a fresh lease when it is a replica)."""
    me = _owner(os.getpid())  # keyed by pid: a forked child is another owner
    if _replica is None:
        return me
    return replace(me, replica=_replica.id, lease_until=_replica.lease_until())


@cache
def _owner(pid: int) -> Owner:
    return Owner(pid, host_name(), _start_time(pid))


def is_alive(
    pid: int | None,
    host: str | None,
    start: str | None,
    replica: str | None = None,
    lease_until: float | None = None,
) -> bool:
    """Whether the recorded owner still runs. On this host the process itself says (a replica whose
    heartbeat is late under load is not dead); on another host a replica's run is dead once its
    lease ran out, and any other process is presumed alive."""
    if pid is None:
        return False
    if host != host_name():
        return replica is None or lease_until is None or lease_until >= time.time()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc: the pid exists, trust it
    fields = stat.rpartition(")")[2].split()
    if fields and fields[0] in ("Z", "X"):  # killed but not yet reaped by its parent
        return False
    return start is None or (len(fields) > 19 and fields[19] == start)
