"""`blockyard serve` under load: 200 concurrent runs over HTTP against the same runs in-process,
then the same load while the flow is hot-reloaded 50 times.

    python bench/bench_serve.py            # BENCH_ROUNDS=3 rounds per variant by default

The flow has 5 model steps; the mock model waits 50 ms per call (profile `delay: 50ms`), so a run
needs at least 250 ms. The server is a real `blockyard serve` subprocess (its own process and
event loop, like production); the HTTP client is httpx in this process. In-process means
`Yard.arun` called 200 times concurrently in one event loop, on the same kind of yard and state
database. Latency is per run, from the request (or call) to its result.

Reload phase: 200 clients keep starting runs while the flow file is rewritten with a new version
50 times (each write waits until the server has reloaded it). Every step of every version stamps
its version into its output, so a run that mixed versions, or ran on another version than the one
it was accepted on, would show it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import header, rounds, table

from engine import Yard

RUNS = int(os.environ.get("BENCH_RUNS", 200))
RELOADS = int(os.environ.get("BENCH_RELOADS", 50))
STEPS = 5
REPO = Path(__file__).resolve().parents[1]

CONFIG = f"""
models:
  default: {{provider: mock, delay: 50ms}}
server: {{max_concurrent_runs: {RUNS + 56}}}
"""
ECHO = """
block: echo
version: 1
kind: llm
inputs:
  text: {type: string}
outputs:
  text: {type: string}
prompt:
  user: "Repeat: {{ text }}"
"""


def chain_flow(version: int) -> str:
    steps = "\n".join(f"  - id: s{i}\n    uses: echo\n    with: {{text: \"v{version} step {i}\"}}\n"
                      f"    outputs: {{text: out{i}}}" for i in range(1, STEPS + 1))
    outputs = ", ".join(f"out{i}" for i in range(1, STEPS + 1))
    return f"flow: chain\nversion: {version}\noutputs: [{outputs}]\nsteps:\n{steps}\n"


def make_yard() -> Path:
    root = Path(tempfile.mkdtemp(prefix="blockyard-bench-serve-"))
    (root / "blocks").mkdir()
    (root / "flows").mkdir()
    (root / "blockyard.yaml").write_text(CONFIG.lstrip())
    (root / "blocks/echo.yaml").write_text(ECHO.lstrip())
    (root / "flows/chain.yaml").write_text(chain_flow(1))
    return root


def stamped(result: dict[str, Any]) -> bool:
    """Every step's output carries the version the run reports."""
    outputs = result.get("outputs") or {}
    version = result.get("version")
    return all(f"v{version} step {i}" in str(outputs.get(f"out{i}", "")) for i in range(1, STEPS + 1))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ---- in-process ---------------------------------------------------------------------------------

async def in_process(yard: Yard) -> tuple[list[float], int]:
    async def one() -> tuple[float, bool]:
        began = time.perf_counter()
        result = await yard.arun("chain", {})
        ok = result.status == "finished" and stamped({"outputs": result.outputs, "version": result.version})
        return time.perf_counter() - began, ok

    done = await asyncio.gather(*(one() for _ in range(RUNS)), return_exceptions=True)
    latencies = [d[0] for d in done if isinstance(d, tuple)]
    errors = sum(1 for d in done if not isinstance(d, tuple) or not d[1])
    return latencies, errors


# ---- over HTTP ----------------------------------------------------------------------------------

class ServeProcess:
    def __init__(self, root: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "BLOCKYARD_TOKEN"}
        env["PYTHONPATH"] = str(REPO)
        self.log = open(root / "serve.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--root", str(root),
                                         "--port", str(self.port)], stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"blockyard serve did not start; see {root / 'serve.log'}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)
        self.log.close()


async def over_http(client: httpx.AsyncClient) -> tuple[list[float], int]:
    async def one() -> tuple[float, bool]:
        began = time.perf_counter()
        response = await client.post("/flows/chain/runs", json={"inputs": {}})
        ok = response.status_code == 200 and response.json()["status"] == "finished" and stamped(response.json())
        return time.perf_counter() - began, ok

    done = await asyncio.gather(*(one() for _ in range(RUNS)), return_exceptions=True)
    latencies = [d[0] for d in done if isinstance(d, tuple)]
    errors = sum(1 for d in done if not isinstance(d, tuple) or not d[1])
    return latencies, errors


async def with_reloads(client: httpx.AsyncClient, root: Path) -> dict[str, Any]:
    """RUNS clients start runs back to back while the flow is reloaded RELOADS times."""
    stop = asyncio.Event()
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    latencies: list[float] = []

    async def worker() -> None:
        while not stop.is_set():
            began = time.perf_counter()
            try:
                response = await client.post("/flows/chain/runs", json={"inputs": {}})
            except httpx.HTTPError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - began)
            if response.status_code != 200:
                failures.append(f"{response.status_code}: {response.text[:200]}")
                continue
            results.append(response.json())

    async def reloader() -> list[float]:
        swaps: list[float] = []
        generation = (await client.get("/healthz")).json()["generation"]
        for version in range(2, RELOADS + 2):
            began = time.perf_counter()
            (root / "flows/chain.yaml").write_text(chain_flow(version))
            while (await client.get("/flows/chain")).json()["version"] != version:
                await asyncio.sleep(0.005)
            swaps.append(time.perf_counter() - began)
            generation += 1
            await asyncio.sleep(0.02)
        return swaps

    workers = [asyncio.create_task(worker()) for _ in range(RUNS)]
    await asyncio.sleep(0.5)  # the load is up before the first reload
    swaps = await reloader()
    await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*workers)
    wrong = [r for r in results if r["status"] != "finished" or not stamped(r)]
    versions = {r["version"] for r in results}
    return {"runs": len(results), "failed": len(wrong) + len(failures), "versions": len(versions),
            "latencies": latencies, "swaps": swaps, "examples": (wrong[:2], failures[:2])}


async def main() -> None:
    count = rounds(3)
    header(f"blockyard serve: {RUNS} concurrent runs of a {STEPS}-step flow, mock model 50 ms per call")
    root = make_yard()
    inproc_root = make_yard()
    server = ServeProcess(root)
    samples: dict[str, list[tuple[list[float], int]]] = {"in-process": [], "HTTP": []}
    limits = httpx.Limits(max_connections=RUNS + 10, max_keepalive_connections=RUNS + 10)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
            yard = Yard.load(inproc_root)
            try:
                await in_process(yard)  # warm-up: compile, open the database, first connections
                await over_http(client)
                for index in range(count):
                    order = ["in-process", "HTTP"] if index % 2 == 0 else ["HTTP", "in-process"]
                    for name in order:
                        samples[name].append(await in_process(yard) if name == "in-process" else
                                             await over_http(client))
            finally:
                yard.close()
            reload = await with_reloads(client, root)
    finally:
        server.stop()
        shutil.rmtree(inproc_root, ignore_errors=True)

    rows = []
    base = statistics.median(percentile(s[0], 0.5) for s in samples["in-process"])
    base99 = statistics.median(percentile(s[0], 0.99) for s in samples["in-process"])
    for name, runs in samples.items():
        p50 = statistics.median(percentile(s[0], 0.5) for s in runs)
        p99 = statistics.median(percentile(s[0], 0.99) for s in runs)
        errors = sum(s[1] for s in runs)
        rows.append([name, f"{p50 * 1000:.0f} ms", f"{p99 * 1000:.0f} ms", f"{p50 / base:.2f}x",
                     f"{p99 / base99:.2f}x", str(errors), str(count * RUNS)])
    print(table(["variant", "p50", "p99", "p50 vs in-process", "p99 vs in-process", "errors", "runs"], rows))
    lat = reload["latencies"]
    print(f"\n### {RUNS} clients starting runs back to back during {RELOADS} hot reloads\n")
    print(table(["runs", "failed or mixed versions", "versions seen", "p50", "p99", "reload served in (median)"],
                [[str(reload["runs"]), str(reload["failed"]), str(reload["versions"]),
                  f"{percentile(lat, 0.5) * 1000:.0f} ms", f"{percentile(lat, 0.99) * 1000:.0f} ms",
                  f"{statistics.median(reload['swaps']) * 1000:.0f} ms"]]))
    if reload["failed"]:
        print("examples:", reload["examples"])
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
