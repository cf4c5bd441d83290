"""`blockyard serve` under load: 200 concurrent runs over HTTP against the same runs in-process,
then the same load while the flow is hot-reloaded 50 times.

    python bench/bench_serve.py            # BENCH_ROUNDS=3 rounds per variant by default
    python bench/bench_serve.py --json     # the figures as one JSON object (bench/compare.py's summary)

BENCH_RUNS=200 concurrent runs and BENCH_RELOADS=50 reloads by default.

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

import argparse
import asyncio
import contextlib
import json
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
    steps = "\n".join(
        f'  - id: s{i}\n    uses: echo\n    with: {{text: "v{version} step {i}"}}\n'
        f"    outputs: {{text: out{i}}}"
        for i in range(1, STEPS + 1)
    )
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
    return all(
        f"v{version} step {i}" in str(outputs.get(f"out{i}", "")) for i in range(1, STEPS + 1)
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ---- in-process ---------------------------------------------------------------------------------


async def in_process(yard: Yard) -> tuple[list[float], int]:
    async def one() -> tuple[float, bool]:
        began = time.perf_counter()
        result = await yard.arun("chain", {})
        ok = result.status == "finished" and stamped(
            {"outputs": result.outputs, "version": result.version}
        )
        return time.perf_counter() - began, ok

    done = await asyncio.gather(*(one() for _ in range(RUNS)), return_exceptions=True)
    latencies = [d[0] for d in done if isinstance(d, tuple)]
    errors = sum(1 for d in done if not isinstance(d, tuple) or not d[1])
    return latencies, errors


# ---- over HTTP ----------------------------------------------------------------------------------


class Connection:
    """A minimal keep-alive HTTP/1.1 client connection. httpx's pool spends more CPU than the server
    at 200 concurrent requests (its clients saw 3x the server-side time), so the load generator
    speaks plain HTTP over asyncio streams instead: what is measured is the server."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        # the server closes a connection idle for 5 s (uvicorn's keep-alive timeout), which a round
        # in-process on a loaded machine can outlast: open a new one rather than fail the request
        if (
            self.writer is None
            or self.writer.is_closing()
            or (self.reader is not None and self.reader.at_eof())
        ):
            if self.writer is not None:
                await self.close()
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


async def post_run(connection: Connection) -> tuple[int, dict[str, Any]]:
    status, body = await connection.request("POST", "/flows/chain/runs", b'{"inputs": {}}')
    return status, json.loads(body)


class ServeProcess:
    def __init__(self, root: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "BLOCKYARD_TOKEN"}
        env["PYTHONPATH"] = str(REPO)
        self.log = open(root / "serve.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine",
                "serve",
                "--root",
                str(root),
                "--port",
                str(self.port),
            ],
            stdout=self.log,
            stderr=self.log,
            env=env,
        )
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


async def over_http(connections: list[Connection]) -> tuple[list[float], int]:
    async def one(connection: Connection) -> tuple[float, bool]:
        began = time.perf_counter()
        status, result = await post_run(connection)
        ok = status == 200 and result["status"] == "finished" and stamped(result)
        return time.perf_counter() - began, ok

    done = await asyncio.gather(*(one(c) for c in connections), return_exceptions=True)
    latencies = [d[0] for d in done if isinstance(d, tuple)]
    errors = sum(1 for d in done if not isinstance(d, tuple) or not d[1])
    for problem in [d for d in done if not isinstance(d, tuple)][:3]:
        print("error:", repr(problem))
    return latencies, errors


async def with_reloads(
    client: httpx.AsyncClient, connections: list[Connection], root: Path
) -> dict[str, Any]:
    """RUNS clients start runs back to back while the flow is reloaded RELOADS times."""
    stop = asyncio.Event()
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    latencies: list[float] = []

    async def worker(connection: Connection) -> None:
        while not stop.is_set():
            began = time.perf_counter()
            try:
                status, result = await post_run(connection)
            except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - began)
            if status != 200:
                failures.append(f"{status}: {str(result)[:200]}")
                continue
            results.append(result)

    async def reloader() -> list[float]:
        swaps: list[float] = []
        for version in range(2, RELOADS + 2):
            began = time.perf_counter()
            (root / "flows/chain.yaml").write_text(chain_flow(version))
            while (await client.get("/flows/chain")).json()["version"] != version:
                await asyncio.sleep(0.005)
            swaps.append(time.perf_counter() - began)
            await asyncio.sleep(0.02)
        return swaps

    workers = [asyncio.create_task(worker(c)) for c in connections]
    await asyncio.sleep(0.5)  # the load is up before the first reload
    swaps = await reloader()
    await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*workers)
    wrong = [r for r in results if r["status"] != "finished" or not stamped(r)]
    versions = {r["version"] for r in results}
    return {
        "runs": len(results),
        "failed": len(wrong) + len(failures),
        "versions": len(versions),
        "latencies": latencies,
        "swaps": swaps,
        "examples": (wrong[:2], failures[:2]),
    }


Samples = dict[str, list[tuple[list[float], int]]]  # variant -> per round: (latencies, errors)


async def measure(count: int) -> tuple[Samples, dict[str, Any]]:
    """`count` interleaved rounds in-process and over HTTP, then the load during hot reloads."""
    root = make_yard()
    inproc_root = make_yard()
    server = ServeProcess(root)
    samples: Samples = {"in-process": [], "HTTP": []}
    connections = [Connection(server.port) for _ in range(RUNS)]
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            yard = Yard.load(inproc_root)
            try:
                await in_process(yard)  # warm-up: compile, open the database, first connections
                await over_http(connections)
                for index in range(count):
                    order = ["in-process", "HTTP"] if index % 2 == 0 else ["HTTP", "in-process"]
                    for name in order:
                        samples[name].append(
                            await in_process(yard)
                            if name == "in-process"
                            else await over_http(connections)
                        )
            finally:
                yard.close()
            reload = await with_reloads(client, connections, root)
            for connection in connections:
                await connection.close()
    finally:
        server.stop()
        shutil.rmtree(inproc_root, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    return samples, reload


def over_rounds(rounds_: list[tuple[list[float], int]], q: float = 0.5) -> float:
    """The median over rounds of each round's percentile `q` of latency."""
    return statistics.median(percentile(s[0], q) for s in rounds_)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="the figures (ms) as one JSON object")
    args = parser.parse_args()
    count = rounds(3)
    if not args.json:
        header(
            f"blockyard serve: {RUNS} concurrent runs of a {STEPS}-step flow, mock model 50 ms per call"
        )
    samples, reload = await measure(count)
    if args.json:
        print(
            json.dumps(
                {
                    "runs": RUNS,
                    "rounds": count,
                    "reloads": RELOADS,
                    "inproc_p50_ms": over_rounds(samples["in-process"]) * 1000,
                    "http_p50_ms": over_rounds(samples["HTTP"]) * 1000,
                    "errors": sum(s[1] for runs in samples.values() for s in runs),
                    "reload_runs": reload["runs"],
                    "reload_failed": reload["failed"],
                    "reload_versions": reload["versions"],
                    "reload_swap_ms": statistics.median(reload["swaps"]) * 1000,
                }
            )
        )
        return
    rows = []
    base, base99 = over_rounds(samples["in-process"]), over_rounds(samples["in-process"], 0.99)
    for name, runs in samples.items():
        median, p99 = over_rounds(runs), over_rounds(runs, 0.99)
        errors = sum(s[1] for s in runs)
        rows.append(
            [
                name,
                f"{median * 1000:.0f} ms",
                f"{p99 * 1000:.0f} ms",
                f"{median / base:.2f}x",
                f"{p99 / base99:.2f}x",
                str(errors),
                str(count * RUNS),
            ]
        )
    print(
        table(
            ["variant", "p50", "p99", "p50 vs in-process", "p99 vs in-process", "errors", "runs"],
            rows,
        )
    )
    lat = reload["latencies"]
    print(f"\n### {RUNS} clients starting runs back to back during {RELOADS} hot reloads\n")
    print(
        table(
            [
                "runs",
                "failed or mixed versions",
                "versions seen",
                "p50",
                "p99",
                "reload served in (median)",
            ],
            [
                [
                    str(reload["runs"]),
                    str(reload["failed"]),
                    str(reload["versions"]),
                    f"{percentile(lat, 0.5) * 1000:.0f} ms",
                    f"{percentile(lat, 0.99) * 1000:.0f} ms",
                    f"{statistics.median(reload['swaps']) * 1000:.0f} ms",
                ]
            ],
        )
    )
    if reload["failed"]:
        print("examples:", reload["examples"])


if __name__ == "__main__":
    asyncio.run(main())
