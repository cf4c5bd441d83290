"""Helpers of the server tests: a small yard, and uvicorn serving it on a free loopback port in a thread."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from engine.serve.app import create_app
from engine.serve.server import Server, Settings
from tests.support.loopback import LOOPBACK

ADDER = """
block: adder
version: 1
description: Add two numbers.
kind: transform
inputs:
  x: {type: integer}
  y: {type: integer}
outputs:
  total: {type: integer}
compute:
  total: "x + y"
"""

ADD_FLOW = """
flow: add
version: 1
description: Add a and b.
inputs:
  a: {type: integer}
  b: {type: integer, default: 2}
outputs: [total]
steps:
  - id: sum
    uses: adder
    with: {x: "{{ inputs.a }}", y: "{{ inputs.b }}"}
"""

PAUSE = """
block: pause
version: 1
description: Wait a little.
kind: wait
duration: 300ms
"""

SLOW_FLOW = """
flow: slow
version: 1
description: Wait, then add.
inputs:
  a: {type: integer, default: 1}
outputs: [total]
steps:
  - id: nap
    uses: pause
  - id: sum
    uses: adder
    with: {x: "{{ inputs.a }}", y: 10}
"""

YARD = {
    "blocks/adder.yaml": ADDER,
    "blocks/pause.yaml": PAUSE,
    "flows/add.yaml": ADD_FLOW,
    "flows/slow.yaml": SLOW_FLOW,
}


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class Live:
    """A server running in a thread: its URL, its parts, and a client for it."""

    url: str
    server: Server
    uv: uvicorn.Server
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop | None = None

    def client(self, token: str | None = None, timeout: float = 30.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, timeout=timeout, headers=headers, verify=LOOPBACK)

    def stop(self) -> None:
        self.uv.should_exit = True
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the server did not stop"

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the server's event loop and return its result."""
        assert self.loop is not None

        async def wrapped() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout=30)


def start_live(settings: Settings) -> Live:
    server = Server(settings)
    app = create_app(server)
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=30
    )
    uv = uvicorn.Server(config)
    live = Live(f"http://127.0.0.1:{port}", server, uv, threading.Thread())

    def serve() -> None:
        async def main() -> None:
            live.loop = asyncio.get_running_loop()
            await uv.serve(sockets=[sock])

        asyncio.run(main())

    live.thread = threading.Thread(target=serve, name="uvicorn-test", daemon=True)
    live.thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        if not live.thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    return live


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll until predicate() is truthy; its value, or an AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


def read_sse(response: Any, stop_after: int | None = None) -> list[dict[str, Any]]:
    """Parse an SSE response into [{id, event, data (parsed JSON)}]; comments (pings) are skipped."""
    import json

    messages: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in current:
                current["data"] = json.loads(current["data"])
                messages.append(current)
                if stop_after is not None and len(messages) >= stop_after:
                    return messages
            current = {}
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            current[field] = (
                current[field] + "\n" + value if field == "data" and "data" in current else value
            )
    return messages


def wait_run(
    client: Any,
    run_id: str,
    statuses: tuple[str, ...] = ("finished", "failed", "waiting", "interrupted"),
) -> dict[str, Any]:
    """Poll GET /runs/{id} until the run reaches one of `statuses`."""
    run: dict[str, Any] = wait_for(
        lambda: (run := client.get(f"/runs/{run_id}").json()).get("status") in statuses and run,
        timeout=30,
    )
    return run


GATED_FLOW = """
flow: gated
version: 1
description: Ask before adding.
inputs:
  a: {type: integer, default: 1}
outputs: [total]
steps:
  - id: ask
    approval:
      message: "Add how much?"
      fields: {b: {type: integer, description: The amount to add.}}
  - id: sum
    uses: adder
    with: {x: "{{ inputs.a }}", y: "{{ context.b }}"}
"""


def start_gated_run(client: Any, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start a run of the `gated` flow; it must be served and stop at its gate."""
    flows = [f["name"] for f in client.get("/flows").json()["flows"]]
    assert "gated" in flows, client.get("/diagnostics").json()["diagnostics"]
    result: dict[str, Any] = client.post("/flows/gated/runs", json={"inputs": inputs or {}}).json()
    assert result["status"] == "waiting", result
    return result


@dataclass
class ServeProcess:
    """A `blockyard serve` started as a process of its own (replicas, kill -9), its URL and its log."""

    process: subprocess.Popen[str]
    url: str
    log: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, verify=LOOPBACK)

    def logged(self, text: str) -> bool:
        return text in self.log.read_text(encoding="utf-8")


def stop_all(servers: list[ServeProcess]) -> None:
    """Stop serve processes as a test ends: SIGTERM (after SIGCONT, for one a test stopped with
    SIGSTOP), then a kill for one that has not ended within 30 s."""
    for server in servers:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGCONT)
            server.process.send_signal(signal.SIGTERM)
    for server in servers:
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.process.kill()


def is_up(url: str) -> bool:
    """Whether a server (of any process) answers its /healthz at `url` now."""
    try:
        return httpx.get(f"{url}/healthz", timeout=1, verify=LOOPBACK).status_code == 200
    except httpx.HTTPError:
        return False
