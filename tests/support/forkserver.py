"""The suite's fork server: one Python process that has imported the engine and forks test children.

Most of a `python -m engine ...` child's CPU time goes to importing LangGraph, LangChain, pydantic and
the engine (~1 s of CPU on the 2-core CI machine), and the suite starts some fifty of them per pass:
runs killed with kill -9 and resumed by another process, servers, racing deciders. What those tests
need is a separate process — its own pid, memory, file descriptors and database connections, killed
for real — not a fresh interpreter. So tests/support/processes.py asks this server to fork one: the
child takes the caller's argv, environment, working directory and stdin/stdout/stderr (passed over a
Unix socket), resets the signal dispositions a new interpreter starts with, and then runs the module
or script as `__main__` exactly as `python -m MODULE`/`python SCRIPT` would, and exits through the
interpreter's normal shutdown (non-daemon threads joined, atexit handlers run, SystemExit's code,
a traceback and exit 1 for an uncaught exception, death by SIGINT for an uncaught KeyboardInterrupt).
The server reports the child's pid, then its exit status and the CPU time it spent.

What a child cannot tell apart from a fresh process is what the fork shares: the modules imported here
(all of `engine`, nothing run) and the interpreter's start-up state. So the tests about start-up itself
— which modules a command imports, its collector at start, `-X importtime`, `-c` probes — are never sent
here (processes.py sends only plain `python [-u] -m MODULE ...` and `python [-u] SCRIPT.py ...` with
the server's own Python settings), and this module imports nothing of the engine's that starts a thread
or reads the environment at import (a child's environment is set after the fork).

usage: python -m tests.support.forkserver SOCKET_PATH   (prints "ready" once it listens; exits when
its stdin closes, i.e. when the pytest process that started it ends)
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import pkgutil
import runpy
import selectors
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE = 1 << 20  # a request: argv and environment as JSON
SKIP = {"engine.console", "engine.__main__"}  # entry points: they act on import (engine/console.py)


@dataclass
class Request:
    argv: list[str]  # what the child's sys.argv holds (argv[0] replaced as Python does)
    module: str | None  # `-m MODULE`
    script: str | None  # or `SCRIPT`
    env: dict[str, str]
    cwd: str
    new_session: bool
    unbuffered: bool
    fds: list[int]  # the child's stdin, stdout, stderr


def preload() -> None:
    """Import every module of the engine (and the SQLite saver), as a child would on its way."""
    import engine

    for found in pkgutil.walk_packages(engine.__path__, "engine."):
        if found.name not in SKIP:
            importlib.import_module(found.name)
    importlib.import_module("langgraph.checkpoint.sqlite.aio")
    if threading.active_count() != 1:
        # a fork keeps only the forking thread: no thread may exist here
        raise SystemExit(f"forkserver: importing started threads {threading.enumerate()}")


def serve(path: str) -> Request:
    """Accept requests until stdin closes; returns only in a forked child, with its request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    # only to wake the selector: children are reaped below
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    selector.register(0, selectors.EVENT_READ)  # stdin: closed when the pytest process ends
    waiting: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj == 0:
                if not os.read(0, 4096):
                    raise SystemExit(0)
            elif key.fileobj is wake_read:
                wake_read.recv(4096)
            else:
                conn, _ = listener.accept()
                request = _receive(conn)
                if request is None:
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    for sock in (listener, wake_read, wake_write, conn, *waiting.values()):
                        sock.close()
                    selector.close()
                    return request
                for fd in request.fds:
                    os.close(fd)
                conn.sendall(f"pid {pid}".encode())
                waiting[pid] = conn
        _reap(waiting)


def _receive(conn: socket.socket) -> Request | None:
    data, fds, _flags, _addr = socket.recv_fds(conn, MAX_MESSAGE, 3)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    fields: dict[str, Any] = json.loads(data)
    return Request(fds=list(fds), **fields)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            # the caller is gone: nobody asks for this status any more
            with contextlib.suppress(OSError):
                # and its CPU (its reaped children's too), which tests/support/cpu.py counts as its caller's
                cpu = usage.ru_utime + usage.ru_stime
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)} {cpu:.6f}".encode())
            conn.close()


def become(request: Request) -> None:
    """In the forked child: take the caller's process settings, then run the program as __main__."""
    # the dispositions a new interpreter starts with (and SIGCHLD's, which the server caught)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if request.new_session:
        os.setsid()
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
    for fd in set(request.fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    _standard_streams(request)
    if request.module is not None:
        sys.argv = ["-m", *request.argv[1:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(request.module, run_name="__main__", alter_sys=True)
    else:
        assert request.script is not None
        if not os.path.exists(request.script):  # as Python says it
            print(
                f"{sys.executable}: can't open file {os.path.abspath(request.script)!r}: [Errno 2] No such file or "
                "directory",
                file=sys.stderr,
            )
            raise SystemExit(2)
        sys.argv = [request.script, *request.argv[1:]]
        sys.path[0] = os.path.dirname(os.path.realpath(request.script))
        runpy.run_path(request.script, run_name="__main__")


def _standard_streams(request: Request) -> None:
    """New sys.stdin/stdout/stderr on fds 0-2, buffered as Python buffers them for this environment."""
    encoding = request.env.get("PYTHONIOENCODING", "").split(":")[0] or sys.stdout.encoding
    unbuffered = request.unbuffered or bool(request.env.get("PYTHONUNBUFFERED"))

    def writer(fd: int, errors: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w", closefd=False)
        buffered: Any = raw if unbuffered else io.BufferedWriter(raw)
        # stdout is line-buffered on a terminal, stderr always (Python 3.9+)
        return io.TextIOWrapper(
            buffered,
            encoding=encoding,
            errors=errors,
            line_buffering=fd == 2 or os.isatty(fd),
            write_through=unbuffered,
        )

    # (sys.__stdin__ and the others stay the server's objects: they wrap the same fds 0-2, left open)
    sys.stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=encoding, errors="strict"
    )
    sys.stdout = writer(1, "strict")
    sys.stderr = writer(2, "backslashreplace")
    sys.dont_write_bytecode = bool(request.env.get("PYTHONDONTWRITEBYTECODE"))


def main(path: str) -> None:
    preload()
    # only a forked child gets past serve(); its program's exit is this process's
    become(serve(path))


if __name__ == "__main__":
    main(sys.argv[1])
