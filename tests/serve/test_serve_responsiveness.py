"""A run evaluating the heaviest template the limits allow must not hold up the server: `/healthz`
answers quickly while it computes (runs execute on a loop of their own, engine/serve/offload.py)."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

from tests.serve.serve_helpers import free_socket, is_up, wait_for
from tests.support import processes
from tests.support.loopback import LOOPBACK

REPO = Path(__file__).resolve().parents[2]

ECHO = """
block: echo
description: Copy a text.
kind: transform
inputs:
  text: {type: any}
outputs:
  copy: {type: any}
compute:
  copy: text
"""

# Each pass builds and rewrites a 1 MB string (the largest the limits allow) in single C calls that
# hold the GIL; the loop goes on until the template's deadline stops it.
BURN = """
flow: burn
inputs:
  n: {type: integer}
outputs: [copy]
steps:
  - id: burn
    uses: echo
    with:
      text: "{% for i in range(inputs.n) %}{{ ('x' * (500000 - i % 2)) | replace('x', 'yy') | length }}{% endfor %}"
"""


def test_healthz_answers_while_a_run_computes_a_heavy_template(tmp_path: Path) -> None:
    yard = tmp_path / "yard"
    # a deadline shorter than the default 5 s: the probes below take about one second
    config = "limits: {template_timeout: 3s}\n"
    for name, text in {
        "blocks/echo.yaml": ECHO,
        "flows/burn.yaml": BURN,
        "blockyard.yaml": config,
    }.items():
        (yard / name).parent.mkdir(parents=True, exist_ok=True)
        (yard / name).write_text(textwrap.dedent(text), encoding="utf-8")
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if k not in ("BLOCKYARD_TOKEN", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(REPO)
    server = processes.Popen(
        [sys.executable, "-m", "engine", "serve", "--port", str(port), "--root", str(yard)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: is_up(url), timeout=60, interval=0.1)
        with httpx.Client(base_url=url, timeout=5, verify=LOOPBACK) as client:
            started = client.post("/flows/burn/runs?wait=false", json={"inputs": {"n": 100_000}})
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            wait_for(
                lambda: client.get(f"/runs/{run_id}").json()["status"] == "running", timeout=10
            )
            latencies = []
            for _ in range(15):
                began = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - began)
                # spread the probes over the run (not a barrier: nothing waits on it)
                time.sleep(0.05)
            after = client.get(f"/runs/{run_id}").json()
            assert after["status"] == "running", (after, latencies)  # every probe met the template
            assert statistics.median(latencies) < 0.1, latencies
            assert max(latencies) < 1.0, latencies
            run = wait_for(
                lambda: (r := client.get(f"/runs/{run_id}").json())["status"] != "running" and r,
                timeout=30,
            )
            assert run["status"] == "failed" and run["error_step"] == "burn"
            assert (
                "template takes longer than 3s (limits.template_timeout in blockyard.yaml)"
                in run["error"]
            )
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
        assert server.returncode == 0
    finally:
        if server.poll() is None:
            # before the fix the template ignores SIGTERM: do not leave it running
            server.kill()
            server.communicate()
