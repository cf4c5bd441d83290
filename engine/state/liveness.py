"""Which process owns a running run, and whether that process is still alive.

A run whose process died (kill -9, power cut, OOM) stays `running` in the table. We record the
owner's pid, host name and process start time, so another process can tell a live owner from a
dead one (or from an unrelated process that got the same pid later) and let `resume` take over.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    start: str | None  # process start time in clock ticks since boot, where the OS tells it


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
    """This process."""
    return _owner(os.getpid())  # keyed by pid: a forked child is another owner


@cache
def _owner(pid: int) -> Owner:
    return Owner(pid, host_name(), _start_time(pid))


def is_alive(pid: int | None, host: str | None, start: str | None) -> bool:
    """Whether the recorded owner still runs. A process on another host is presumed alive."""
    if pid is None:
        return False
    if host != host_name():
        return True
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
