"""Arize Phoenix, the LLM trace viewer, for tests/telemetry/test_phoenix.py: a real receiver of the
engine's OpenTelemetry traces, read back through its REST API.

Phoenix's dependencies clash with the engine's, so it lives in a virtualenv of its own, made from
tests/support/phoenix-requirements.txt (every version pinned, hashes checked: `uv pip install
--require-hashes`) under `~/.cache/blockyard/phoenix-<digest of that file>` (XDG_CACHE_HOME is
honoured), once: reruns reuse it, and a change of the pins makes a new one. `.ci/setup --system`
installs it (`python -m tests.support.phoenix install`); a test session without it installs it itself,
under a file lock, so that parallel workers wait for one install. It runs offline
(PHOENIX_ALLOW_EXTERNAL_RESOURCES=false, no telemetry of its own) on free loopback ports, its
database in a temporary folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = Path(__file__).resolve().parent / "phoenix-requirements.txt"
INSTALL_TIMEOUT = 900.0
START_TIMEOUT = 180.0
DONE = ".installed"  # written last: a venv without it is half made and made again


class Unavailable(Exception):
    """Phoenix cannot be installed or started here (no network for the first install, no Python 3.11+)."""


def venv_path() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    return cache / "blockyard" / f"phoenix-{digest}"


def install() -> Path:
    """Phoenix's venv (made if missing); its python."""
    venv = venv_path()
    python = venv / "bin" / "python"
    if (venv / DONE).is_file():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / "phoenix.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker (or setup) may be installing it right now
        if (venv / DONE).is_file():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)  # this Python, not the suite's venv
        for step in (
            ["venv", "--relocatable", "--quiet", "--python", base, str(venv)],
            [
                "pip",
                "install",
                "--quiet",
                "--require-hashes",
                "-r",
                str(REQUIREMENTS),
                "--python",
                str(python),
            ],
        ):
            try:
                done = subprocess.run(
                    ["bash", str(REPO / ".ci" / "uv"), *step],
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT,
                )
            except subprocess.TimeoutExpired:
                raise Unavailable(
                    f"installing Phoenix took more than {INSTALL_TIMEOUT:g}s"
                ) from None
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise Unavailable(f"`uv {step[0]}` for Phoenix failed: {last}")
        (venv / DONE).write_text(REQUIREMENTS.read_text(encoding="utf-8"), encoding="utf-8")
    return python


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Phoenix:
    """A running Phoenix: its URL (the UI, the REST API and OTLP/HTTP at /v1/traces)."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def get(self, path: str, **query: Any) -> Any:
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        with urllib.request.urlopen(url, timeout=30) as answer:
            return json.load(answer)

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of `project` Phoenix has stored (GET /v1/projects/{project}/spans, all pages)."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query: dict[str, Any] = {"limit": 1000}
            if cursor:
                query["cursor"] = cursor
            try:
                page = self.get(f"/v1/projects/{urllib.parse.quote(project)}/spans", **query)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # no span of the project has arrived yet
                    return []
                raise
            found.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def start(python: Path, workdir: Path) -> Phoenix:
    """Phoenix from the venv of `python`, its data in `workdir`, on free ports; returned once it answers."""
    port, grpc = _free_port(), _free_port()
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("PHOENIX_", "OTEL_"))
    }
    env.pop("PYTHONPATH", None)
    env.update(
        {
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(grpc),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_WORKING_DIR": str(workdir),
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
    )
    log = workdir / "phoenix.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(python), "-m", "phoenix.server.main", "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
        )
    phoenix = Phoenix(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Unavailable(
                f"Phoenix exited ({process.returncode}): {log.read_text(errors='replace')[-2000:]}"
            )
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{phoenix.url}/healthz", timeout=2) as answer,
        ):
            if answer.status == 200:
                return phoenix
        time.sleep(0.25)
    phoenix.stop()
    raise Unavailable(
        f"Phoenix did not answer within {START_TIMEOUT:g}s: {log.read_text(errors='replace')[-2000:]}"
    )


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[Phoenix]:
    """Phoenix for a test module: installed if needed, started, stopped at the end; skipped where it
    cannot be had, and failed in CI (tests/conftest.py, `skip_or_fail`)."""
    from tests.conftest import skip_or_fail  # pytest's: only inside a test session

    try:
        phoenix = start(install(), workdir)
    except Unavailable as exc:
        skip_or_fail(str(exc))
        raise
    try:
        yield phoenix
    finally:
        phoenix.stop()


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m tests.support.phoenix install")
    try:
        print(f"Phoenix is installed in {install().parent.parent}")
    except Unavailable as exc:
        sys.exit(f"error: {exc}")
