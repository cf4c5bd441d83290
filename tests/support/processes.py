"""Child processes for the tests: `Popen` and `run`, as subprocess's, that fork Python children from the
suite's fork server (tests/support/forkserver.py) instead of starting a new interpreter, where that is
the same thing to the test.

A request goes to the fork server when it is a plain `python [-u] -m MODULE ARGS` or `python [-u]
SCRIPT.py ARGS` with this interpreter, its Python settings (the PYTHON* environment variables) the
server's own, and no option the server cannot honour (preexec_fn, pass_fds, uid/gid, a process group,
a shell). Everything else — `-c` probes, `-X importtime`, another interpreter, a venv, git, node — is
started by subprocess as usual, and so is everything when no server runs (a helper used outside
pytest, or BLOCKYARD_TEST_FORKSERVER=0). The returned object is a subprocess.Popen: pipes, text
mode, communicate(), wait(), poll(), send_signal() and kill() behave alike; only the exit status
comes from the server (it is the child's parent) instead of waitpid.

The session's server is started by tests/conftest.py: before pytest-xdist's workers (`start()`), which
find it through FORKSERVER_ENV, or, in a session of one process (`-n 0`), by its first Python child
(`start_on_first_use()`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FORKSERVER_ENV = "BLOCKYARD_TEST_FORKSERVER"  # the server's socket path; "0" turns the server off
REPO = Path(__file__).resolve().parents[2]
# Python's start-up settings that a fork cannot change (PYTHONUNBUFFERED and PYTHONIOENCODING it can,
# PYTHONDONTWRITEBYTECODE and PYTHONPYCACHEPREFIX only say where bytecode of modules imported later goes)
HONOURED = {
    "PYTHONUNBUFFERED",
    "PYTHONIOENCODING",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONPYCACHEPREFIX",
}


def start() -> subprocess.Popen[str] | None:
    """Start the session's fork server (once, in the process that starts the others); None when turned
    off. It stops when this process ends (its stdin closes)."""
    if os.environ.get(FORKSERVER_ENV):
        return None  # turned off, or a server of an enclosing session (a pytest run by a test) is in use
    return _launch(dict(os.environ))


def start_on_first_use() -> None:
    """Have the first Python child of this process start the session's server, not the session's start.

    For a session that runs in one process (`-n 0`): the server imports the whole engine, ~4.5 CPU-s on
    2 cores, which a run of a few tests that start no Python child (the docs' narrowed `bash .ci/test`,
    a developer's single file) would pay for nothing. A session on pytest-xdist's workers starts it at
    once instead (`start()`): they all share it, and they find it through the environment they inherit.
    The server gets the environment of this moment, not that of the test whose child starts it (a test
    may have changed PYTHON* settings for its own children)."""
    if not os.environ.get(FORKSERVER_ENV):
        _deferred["env"] = dict(os.environ)


def stop_started() -> None:
    """Stop the server start_on_first_use() started, if a child started it."""
    server = _deferred.pop("server", None)
    if server is not None:
        stop(server)


# start_on_first_use(): the environment to start the server with, then the server; the lock keeps two
# threads starting their first children at once from starting two
_deferred: dict[str, Any] = {}
_deferred_lock = threading.Lock()


def _launch(environment: dict[str, str]) -> subprocess.Popen[str]:
    path = Path(tempfile.mkdtemp(prefix="blockyard-forkserver-")) / "socket"
    env = {**environment, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.forkserver", str(path)],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    if server.stdout.readline().strip() != "ready":
        server.kill()
        raise RuntimeError(f"the fork server did not start (exit {server.wait()})")
    os.environ[FORKSERVER_ENV] = str(path)
    os.environ["BLOCKYARD_TEST_FORKSERVER_PYTHON"] = json.dumps(_settings(env))
    return server


def _server_settings() -> dict[str, str] | None:
    """The Python settings of the server's children (those of the deferred one, before it starts); None
    when no server runs or will."""
    if os.environ.get(FORKSERVER_ENV) == "0":
        return None  # turned off
    deferred = _deferred.get("env")
    if deferred is not None:
        return _settings({**deferred, "PYTHONPATH": str(REPO)})
    if not os.environ.get(FORKSERVER_ENV):
        return None
    expected = os.environ.get("BLOCKYARD_TEST_FORKSERVER_PYTHON")
    return None if expected is None else dict(json.loads(expected))


def _server_path() -> str:
    """The running server's socket, starting a deferred one now."""
    with _deferred_lock:
        if "env" in _deferred:
            _deferred["server"] = _launch(_deferred.pop("env"))
    return os.environ[FORKSERVER_ENV]


def stop(server: subprocess.Popen[str]) -> None:
    """Stop the session's fork server (its children live on) and remove its socket's folder."""
    assert server.stdin is not None
    server.stdin.close()  # the server exits when its stdin closes
    server.wait(timeout=30)
    shutil.rmtree(Path(os.environ[FORKSERVER_ENV]).parent, ignore_errors=True)


def _settings(env: Mapping[str, str]) -> dict[str, str]:
    return {
        name: value
        for name, value in env.items()
        if name.startswith("PYTHON") and name not in HONOURED
    }


def request_for(
    args: Any, executable: Any, env: Mapping[str, str] | None, cwd: Any
) -> dict[str, Any] | None:
    """What to ask the fork server for, or None when this must be a new interpreter."""
    if executable is not None or isinstance(args, (str, bytes, os.PathLike)):
        return None
    argv = [os.fsdecode(arg) for arg in args]
    if len(argv) < 2 or argv[0] != sys.executable:
        return None
    env = dict(os.environ if env is None else env)
    expected = _server_settings()
    if expected is None or _settings(env) != expected:
        return None
    rest = argv[1:]
    unbuffered = rest[0] == "-u"
    if unbuffered:
        rest = rest[1:]
    module = script = None
    if len(rest) >= 2 and rest[0] == "-m":
        module, program_args = rest[1], rest[2:]
    elif rest and rest[0].endswith(".py") and not rest[0].startswith("-"):
        script, program_args = rest[0], rest[1:]
    else:
        return None
    return {
        "argv": [argv[0], *program_args],
        "module": module,
        "script": script,
        "env": env,
        "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
        "unbuffered": unbuffered,
    }


class Popen(subprocess.Popen):  # type: ignore[type-arg]  # generic like subprocess.Popen at run time
    """subprocess.Popen whose Python children may be forks of the fork server (see the module's docstring)."""

    _server: socket.socket | None = None

    # The hooks below are subprocess.Popen's own (CPython 3.11's POSIX implementation): the pipes, text
    # handling and communicate() stay subprocess's; only starting and reaping the child differ.
    def _execute_child(
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: Any,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: Any,
        shell: Any,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        restore_signals: Any,
        gid: Any,
        gids: Any,
        uid: Any,
        umask: Any,
        start_new_session: bool,
        process_group: Any,
    ) -> None:
        request = None
        if not (
            shell
            or preexec_fn
            or pass_fds
            or gid is not None
            or gids is not None
            or uid is not None
            or umask >= 0
            or process_group not in (None, -1)
        ):
            request = request_for(args, executable, env, cwd)
        path = _server_path() if request is not None else "0"
        if request is None:
            super()._execute_child(  # type: ignore[misc]
                args,
                executable,
                preexec_fn,
                close_fds,
                pass_fds,
                cwd,
                env,
                startupinfo,
                creationflags,
                shell,
                p2cread,
                p2cwrite,
                c2pread,
                c2pwrite,
                errread,
                errwrite,
                restore_signals,
                gid,
                gids,
                uid,
                umask,
                start_new_session,
                process_group,
            )
            return
        request["new_session"] = bool(start_new_session)
        fds = [
            p2cread if p2cread != -1 else 0,
            c2pwrite if c2pwrite != -1 else 1,
            errwrite if errwrite != -1 else 2,
        ]
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            server.connect(path)
            socket.send_fds(server, [json.dumps(request).encode()], fds)
            reply = server.recv(256).decode()
        except OSError:
            server.close()
            raise
        if not reply.startswith("pid "):
            server.close()
            raise RuntimeError(f"the fork server refused {args!r}: {reply!r}")
        self.pid = int(reply.split()[1])
        self._child_created = True
        self._server = server
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]

    def _internal_poll(self, _deadstate: Any = None, **kwargs: Any) -> int | Any:
        if self._server is None:
            return super()._internal_poll(_deadstate, **kwargs)  # type: ignore[misc]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                if self.returncode is None:
                    self._status(0.0)
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode

    def _wait(self, timeout: float | None) -> int | Any:
        if self._server is None:
            return super()._wait(timeout)  # type: ignore[misc]
        with self._waitpid_lock:  # type: ignore[attr-defined]
            if self.returncode is None and not self._status(timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode

    def _status(self, timeout: float | None) -> bool:
        """Take the exit status from the server, waiting up to `timeout` (None: as long as it takes)."""
        assert self._server is not None
        self._server.settimeout(timeout)
        try:
            reply = self._server.recv(256).decode()
        except (BlockingIOError, TimeoutError):
            return False
        self._server.close()
        # an empty reply: the server died before the child (it never does before its session ends)
        words = reply.split()
        self.returncode = int(words[1]) if reply.startswith("exit ") else 255
        if len(words) > 2:
            _forked[0] += float(words[2])
        return True


_forked = [
    0.0
]  # CPU seconds of the children the fork server forked for this process, once each ended


def forked_cpu() -> float:
    """CPU seconds the fork server's children of this process spent, those whose exit status came in
    (tests/support/cpu.py)."""
    return _forked[0]


def run(
    args: Sequence[Any],
    *,
    input: str | bytes | None = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[Any]:
    """subprocess.run with this module's Popen."""
    if capture_output:
        options["stdout"] = options["stderr"] = subprocess.PIPE
    if input is not None:
        options["stdin"] = subprocess.PIPE
    with Popen(args, **options) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            process.kill()
            exc.stdout, exc.stderr = process.communicate()
            raise
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done
