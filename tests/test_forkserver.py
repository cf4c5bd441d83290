"""The suite's fork server (tests/support/forkserver.py, processes.py): a Python child forked from it
behaves as the same program started as a new interpreter — same output, exit status, signals, stdin —
and is a process of its own; what a fork cannot stand in for still starts a new interpreter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import processes

# the suite's children run with the repository on PYTHONPATH (tests/runtime/conftest.py, subprocess_env), as the
# fork server does: a child whose Python settings differ from the server's starts a new interpreter
ENV = {**os.environ, "PYTHONPATH": str(processes.REPO)}

PROGRAMS = {
    "argv, cwd, environment, stdin, both streams and the exit code": """
        import os, sys
        print(sys.argv[1:], os.path.basename(os.getcwd()), os.environ.get("PROBE"), __name__)
        print("line:", sys.stdin.readline().strip())
        print("to stderr", file=sys.stderr)
        print(sys.path[0] == os.path.dirname(os.path.realpath(__file__)))
        sys.exit(7)
    """,
    "an uncaught exception": """
        print("before", flush=True)
        raise ValueError("boom")
    """,
    "threads joined and atexit run at the end, output flushed": """
        import atexit, threading, time
        atexit.register(lambda: print("atexit"))
        threading.Thread(target=lambda: (time.sleep(0.2), print("thread"))).start()
        print("main done")
    """,
    "an uncaught KeyboardInterrupt": """
        raise KeyboardInterrupt
    """,
}


def _both(
    tmp_path: Path, source: str
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    argv = [sys.executable, str(script), "a b", "ü"]
    env = {**ENV, "PROBE": "set"}
    assert processes.request_for(argv, None, env, tmp_path) is not None  # goes to the server
    real = subprocess.run(
        argv, cwd=tmp_path, env=env, input="hello\n", capture_output=True, text=True, timeout=60
    )
    forked = processes.run(
        argv, cwd=tmp_path, env=env, input="hello\n", capture_output=True, text=True, timeout=60
    )
    return real, forked


def _last_lines(text: str) -> list[str]:
    # a traceback's frames differ (the fork's start is in forkserver.py); its last line is the same
    return [line for line in text.splitlines() if not line.startswith(("  ", "Traceback"))]


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_forked_child_gives_what_a_new_interpreter_gives(tmp_path: Path, name: str) -> None:
    real, forked = _both(tmp_path, PROGRAMS[name])
    assert (forked.returncode, forked.stdout, _last_lines(forked.stderr)) == (
        real.returncode,
        real.stdout,
        _last_lines(real.stderr),
    )


def test_a_forked_child_is_a_process_of_its_own_killed_for_real(tmp_path: Path) -> None:
    # the session's server (started for the first child, in a session of one process)
    script = tmp_path / "wait.py"
    script.write_text(
        "import os, sys\nprint(os.getpid(), os.getppid(), flush=True)\nsys.stdin.read()\n"
    )
    child = processes.Popen(
        [sys.executable, "-u", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert child.stdout is not None
    pid, parent = map(int, child.stdout.readline().split())
    assert pid == child.pid and parent not in (
        os.getpid(),
        pid,
    )  # the server's child, not the test's
    assert child.poll() is None
    child.kill()
    assert child.wait(timeout=30) == -signal.SIGKILL
    with pytest.raises(ProcessLookupError, match="No such process"):
        os.kill(pid, 0)  # reaped: gone, not a zombie


def test_ctrl_c_reaches_a_forked_child_as_a_new_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "nap.py"
    script.write_text("import time\nprint('napping', flush=True)\ntime.sleep(60)\n")
    outcomes = []
    for start in (subprocess.Popen, processes.Popen):
        child = start(
            [sys.executable, str(script)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        assert child.stdout is not None and child.stdout.readline() == "napping\n"
        child.send_signal(signal.SIGINT)
        _out, err = child.communicate(timeout=30)
        outcomes.append((child.returncode, err.splitlines()[-1]))
    assert outcomes[0] == outcomes[1] == (-signal.SIGINT, "KeyboardInterrupt")


def test_a_module_runs_as_main_and_a_wait_times_out(tmp_path: Path) -> None:
    assert processes.request_for([sys.executable, "-m", "json.tool"], None, ENV, None) is not None
    done = processes.run(
        [sys.executable, "-m", "json.tool"],
        input='{"b": [1, 2]}',
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert (done.returncode, done.stdout) == (0, '{\n    "b": [\n        1,\n        2\n    ]\n}\n')
    child = processes.Popen(
        [sys.executable, "-m", "json.tool"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=ENV,
    )
    with pytest.raises(subprocess.TimeoutExpired, match=r"timed out after 0.2 seconds"):
        child.wait(timeout=0.2)  # waits for its stdin
    child.communicate(b"[]", timeout=30)
    assert child.returncode == 0


def test_what_a_fork_cannot_stand_in_for_starts_a_new_interpreter(tmp_path: Path) -> None:
    probe = "import os; print(os.getppid())"
    for argv in ([sys.executable, "-c", probe], [sys.executable, "-X", "importtime", "-c", probe]):
        done = processes.run(argv, capture_output=True, text=True, timeout=60, env=ENV)
        assert done.stdout.strip() == str(os.getpid())
    script = tmp_path / "ppid.py"
    script.write_text(probe)
    assert processes.request_for([sys.executable, str(script)], None, ENV, None) is not None
    env = {
        **ENV,
        "PYTHONHASHSEED": "123",
    }  # a start-up setting the server's interpreter does not have
    assert processes.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
    ).stdout.strip() == str(os.getpid())


def test_a_forked_child_s_cpu_is_reported_with_its_exit_status(tmp_path: Path) -> None:
    """What tests/support/cpu.py counts as the caller's: the child is the server's, not this process's."""
    script = tmp_path / "spin.py"
    script.write_text(
        "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end:\n    pass\n",
        encoding="utf-8",
    )
    argv = [sys.executable, str(script)]
    assert processes.request_for(argv, None, ENV, tmp_path) is not None  # goes to the server
    before = processes.forked_cpu()
    assert processes.run(argv, cwd=tmp_path, env=ENV, timeout=60).returncode == 0
    assert 0.4 <= processes.forked_cpu() - before < 5
