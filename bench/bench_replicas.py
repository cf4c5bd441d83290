"""`blockyard serve` replicas on one Postgres database (docs/postgres.md, "Measuring replicas").

    python bench/bench_replicas.py              # 100 runs per sample, BENCH_ROUNDS=2 rounds: under 3 minutes
    python bench/bench_replicas.py 10           # runs per sample from argv (or BENCH_RUNS)
    BENCH_IN_FLIGHT=64 BENCH_LEASE=3 BENCH_TAKEOVER_RUNS=20 python bench/bench_replicas.py

Needs Debian's `postgresql` package (initdb, pg_ctl): a throw-away cluster is started in a temporary
folder by the tests' helper (tests/support/postgres.py) and removed at the end.

1. Throughput: 1, 2 and 3 replicas (real `python -m engine serve` processes on 127.0.0.1, each with
   BLOCKYARD_DATABASE_URL set to one database per variant) run a 5-step flow whose mock model waits
   50 ms per call. RUNS runs per sample are posted (`POST /flows/five/runs`, which answers when the
   run has finished) round-robin across the replicas, at most IN_FLIGHT at once (httpx, this
   process). Reported: runs per second (RUNS / wall time of the sample) and p50/p99 of the per-run
   latency (submit -> finished answer); medians over interleaved rounds (bench/_harness.py).
2. Postgres against SQLite on one replica: the same flow and load; the SQLite replica uses the
   yard's own state file.
3. Takeover: two replicas, A and B, with `server.lease_seconds: LEASE`. TAKEOVER_RUNS runs (the same
   flow with a 500 ms model, so they are mid-flight when A dies) are started on A; once each has
   finished a step, A gets SIGKILL. Measured per run A left unfinished: the time from the kill to its
   `run_started` event with `resumed: true` (B took it over) and to its next `step_started`, from the
   event times B wrote. As root, A runs in its own UTS namespace under another host name (`unshare
   --uts`), so B judges it as a replica on another host does — by its lease running out; without
   root both are on one host, and B sees the dead pid on its next lease round (every third of the
   lease), which is quicker than production's cross-host case.

The load generator shares the machine's cores with the servers and the database: on a machine with
few cores, the figures for more replicas are bounded by the CPU, not by the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests.support (the Postgres cluster helper)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import measure, median, rounds, table

from engine import __version__
from engine.state.location import URL_ENV
from tests.support import postgres

REPO = Path(__file__).resolve().parents[1]
# the defaults take under 3 minutes on a quiet 2-core machine; more for steadier figures
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("BENCH_RUNS", 100))
IN_FLIGHT = int(os.environ.get("BENCH_IN_FLIGHT", 64))
LEASE = float(os.environ.get("BENCH_LEASE", 3))
TAKEOVER_RUNS = int(os.environ.get("BENCH_TAKEOVER_RUNS", 12))
ROUNDS = 2  # default of BENCH_ROUNDS
STEPS = 5
DELAY_MS = 50
TAKEOVER_DELAY_MS = 500


# ---- yards and processes ------------------------------------------------------------------------


def yard(delay_ms: int) -> Path:
    root = Path(tempfile.mkdtemp(prefix="blockyard-bench-replicas-"))
    steps = "\n".join(
        f'  - {{id: s{i}, uses: think, with: {{topic: "{{{{ inputs.topic }}}} {i}"}}}}'
        for i in range(STEPS)
    )
    files = {
        "blockyard.yaml": f"""
            models:
              default: {{provider: mock, delay: {delay_ms}ms}}
            server:
              max_concurrent_runs: {max(IN_FLIGHT, TAKEOVER_RUNS) * 2}
              lease_seconds: {LEASE}
        """,
        "blocks/think.yaml": """
            block: think
            kind: llm
            inputs: {topic: {type: string}}
            outputs: {thought: {type: string}}
            prompt: {user: "Think about {{ topic }}."}
        """,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (root / "flows").mkdir()
    (root / "flows/five.yaml").write_text(
        f"flow: five\ninputs: {{topic: {{type: string, default: x}}}}\noutputs: [thought]\nsteps:\n{steps}\n"
    )
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    url: str
    log: Path


@dataclass
class Processes:
    """Every server this script started, stopped in `close` whatever happened."""

    started: list[Replica] = field(default_factory=list)
    # yards (with the servers' logs), removed after a clean run
    roots: list[Path] = field(default_factory=list)

    def yard(self, delay_ms: int) -> Path:
        root = yard(delay_ms)
        self.roots.append(root)
        return root

    def serve(self, root: Path, url: str | None, name: str, *, other_host: bool = False) -> Replica:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("BLOCKYARD_TOKEN", URL_ENV)}
        env["PYTHONPATH"] = str(REPO)
        if url is not None:
            env[URL_ENV] = url
        command = [
            sys.executable,
            "-m",
            "engine",
            "serve",
            "--no-reload",
            "--grace",
            "1",
            "--port",
            str(port),
            "--root",
            str(root),
        ]
        if other_host:  # same pid as the server (unshare and sh exec), so SIGKILL hits it
            command = [
                "unshare",
                "--uts",
                "sh",
                "-c",
                'hostname "$0" && exec "$@"',
                f"bench-{name}",
                *command,
            ]
        log = root / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        replica = Replica(process, f"http://127.0.0.1:{port}", log)
        self.started.append(replica)
        return replica

    def wait_up(self, replicas: list[Replica]) -> None:
        deadline = time.monotonic() + 90
        for replica in replicas:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{replica.url}/healthz", timeout=1).status_code == 200:
                        break
                if replica.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"blockyard serve did not start; see {replica.log}:\n"
                        + replica.log.read_text(errors="replace")[-2000:]
                    )
                time.sleep(0.1)

    def close(self) -> None:
        for replica in self.started:
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in self.started:
            try:
                replica.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait(timeout=20)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ---- 1 and 2: throughput --------------------------------------------------------------------------


@dataclass
class Variant:
    name: str
    backend: str
    replicas: list[Replica]
    clients: list[httpx.AsyncClient] = field(default_factory=list)
    latencies: list[list[float]] = field(default_factory=list)  # per sample
    walls: list[float] = field(default_factory=list)
    errors: int = 0

    async def sample(self) -> float:
        gate = asyncio.Semaphore(IN_FLIGHT)
        latencies: list[float] = []

        async def one(n: int) -> None:
            async with gate:
                began = time.perf_counter()
                try:
                    response = await self.clients[n % len(self.clients)].post(
                        "/flows/five/runs", json={"inputs": {"topic": f"t{n}"}}
                    )
                    ok = response.status_code == 200 and response.json()["status"] == "finished"
                except (httpx.HTTPError, ValueError, KeyError):
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - began)
                else:
                    self.errors += 1

        began = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(RUNS)))
        wall = time.perf_counter() - began
        self.latencies.append(latencies)
        self.walls.append(wall)
        return wall


async def throughput(cluster: postgres.Cluster, processes: Processes) -> list[Variant]:
    plans = [
        ("Postgres, 1 replica", "postgres", 1),
        ("Postgres, 2 replicas", "postgres", 2),
        ("Postgres, 3 replicas", "postgres", 3),
        ("SQLite, 1 replica", "sqlite", 1),
    ]
    variants = []
    for name, backend, count in plans:
        root = processes.yard(DELAY_MS)
        url = cluster.fresh_database() if backend == "postgres" else None
        started = [processes.serve(root, url, f"r{i}") for i in range(count)]
        variants.append(Variant(name, backend, started))
    processes.wait_up([r for v in variants for r in v.replicas])
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with contextlib.AsyncExitStack() as stack:
        for variant in variants:
            variant.clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(base_url=r.url, timeout=300, limits=limits)
                )
                for r in variant.replicas
            ]
        await measure({v.name: v.sample for v in variants}, rounds(ROUNDS))
    for variant in variants:  # the warm-up sample is not reported
        del variant.latencies[0], variant.walls[0]
    return variants


def throughput_table(variants: list[Variant]) -> str:
    rows = []
    for v in variants:
        rate = median([RUNS / wall for wall in v.walls])
        p50 = median([percentile(s, 0.5) for s in v.latencies if s])
        p99 = median([percentile(s, 0.99) for s in v.latencies if s])
        rows.append(
            [v.name, f"{rate:.1f}", f"{p50 * 1000:.0f} ms", f"{p99 * 1000:.0f} ms", str(v.errors)]
        )
    return table(["variant", "runs/s", "p50", "p99", "errors"], rows)


# ---- 3: takeover ----------------------------------------------------------------------------------


def events(url: str, run_ids: list[str]) -> list[tuple[str, int, str, str | None, str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT run_id, seq, type, step, time, data FROM events WHERE run_id = ANY(%s) "
            "ORDER BY run_id, seq",
            (run_ids,),
        ).fetchall()
    return [(str(a), int(b), str(c), d, str(e), str(f)) for a, b, c, d, e, f in rows]


def event_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def takeover(cluster: postgres.Cluster, processes: Processes) -> dict[str, Any]:
    other_host = os.geteuid() == 0 and shutil.which("unshare") is not None
    root = processes.yard(TAKEOVER_DELAY_MS)
    url = cluster.fresh_database()
    a = processes.serve(root, url, "a", other_host=other_host)
    b = processes.serve(root, url, "b")
    processes.wait_up([a, b])
    async with httpx.AsyncClient(base_url=a.url, timeout=60) as client:
        accepted = await asyncio.gather(
            *(
                client.post("/flows/five/runs?wait=false", json={"inputs": {"topic": str(n)}})
                for n in range(TAKEOVER_RUNS)
            )
        )
    run_ids = [r.json()["run_id"] for r in accepted]
    deadline = time.monotonic() + 60
    while True:  # every run has finished a step on A: all are mid-flight
        finished = {e[0] for e in events(url, run_ids) if e[2] == "step_finished"}
        if len(finished) == len(run_ids):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs did not start on replica A; see {a.log}")
        await asyncio.sleep(0.02)
    a.process.send_signal(signal.SIGKILL)
    killed = time.time()
    a.process.wait(timeout=30)
    before = events(url, run_ids)
    last_seq = {run_id: max(e[1] for e in before if e[0] == run_id) for run_id in run_ids}
    victims = [
        run_id
        for run_id in run_ids
        if not any(e[0] == run_id and e[2] == "run_finished" for e in before)
    ]
    deadline = time.monotonic() + LEASE * 4 + 120
    while True:
        trace = events(url, run_ids)
        if all(any(e[0] == run_id and e[2] == "run_finished" for e in trace) for run_id in run_ids):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs were not taken over; see {b.log}")
        await asyncio.sleep(0.05)
    resumed: list[float] = []
    stepped: list[float] = []
    for run_id in victims:
        after = [e for e in trace if e[0] == run_id and e[1] > last_seq[run_id]]
        starts = [e for e in after if e[2] == "run_started" and json.loads(e[5]).get("resumed")]
        steps = [e for e in after if e[2] == "step_started"]
        if starts:
            resumed.append(event_time(starts[0][4]) - killed)
        if steps:
            stepped.append(event_time(steps[0][4]) - killed)
    done = [(e[0], e[3]) for e in trace if e[2] == "step_finished"]
    return {
        "other_host": other_host,
        "runs": len(run_ids),
        "victims": len(victims),
        "resumed": resumed,
        "stepped": stepped,
        "repeated": len(done) - len(set(done)),
    }


def takeover_table(result: dict[str, Any]) -> str:
    rows = []
    for label, values in (
        ("kill -> run_started (resumed) on B", result["resumed"]),
        ("kill -> next step_started on B", result["stepped"]),
    ):
        if values:
            rows.append(
                [
                    label,
                    f"{len(values)}/{result['victims']}",
                    f"{median(values):.2f} s",
                    f"lease {median(values) - LEASE:+.2f} s",
                    f"{max(values):.2f} s",
                    f"lease {max(values) - LEASE:+.2f} s",
                ]
            )
        else:
            rows.append([label, f"0/{result['victims']}", "-", "-", "-", "-"])
    return table(
        ["interval", "runs", "median", "median as lease + x", "max", "max as lease + x"], rows
    )


# ---- report -------------------------------------------------------------------------------------


def readme_table(variants: list[Variant], result: dict[str, Any]) -> str:
    """The figures as README's performance table has them (| what | figure |)."""
    rows = []
    by_name = {v.name: v for v in variants}
    one = by_name.get("Postgres, 1 replica")
    for v in variants:
        rate = median([RUNS / wall for wall in v.walls])
        p50 = median([percentile(s, 0.5) for s in v.latencies if s])
        p99 = median([percentile(s, 0.99) for s in v.latencies if s])
        scale = ""
        if one is not None and v is not one and v.backend == "postgres":
            scale = f", {rate / median([RUNS / wall for wall in one.walls]):.2f}x of 1 replica"
        what = (
            f"{v.name} (`blockyard serve` processes), {STEPS}-step flow, mock model {DELAY_MS} ms per call, "
            f"{IN_FLIGHT} in flight (`bench/bench_replicas.py`)"
        )
        rows.append(
            [
                what,
                f"{rate:.1f} runs/s{scale}, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
                f"{v.errors} errors",
            ]
        )
    where = "another host (by its lease)" if result["other_host"] else "the same host (by its pid)"
    for label, values in (
        ("run continued (`run_started`, resumed)", result["resumed"]),
        ("its next step started", result["stepped"]),
    ):
        if values:
            rows.append(
                [
                    f"replica killed (`kill -9`) -> {label} on another replica, lease {LEASE:g} s, "
                    f"dead replica judged as on {where}",
                    f"median {median(values):.2f} s, max {max(values):.2f} s "
                    f"({len(values)}/{result['victims']} runs; steps run twice: {result['repeated']})",
                ]
            )
    return table(["what", "figure"], rows)


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def machine(cluster: postgres.Cluster) -> str:
    model = cpu_model()
    with psycopg.connect(cluster.url("postgres")) as conn:
        server = conn.execute("SHOW server_version").fetchone()
    return "\n".join(
        [
            f"machine: {os.cpu_count()} cpus, {model}, {platform.system()} {platform.release()}",
            f"versions: python {platform.python_version()}, blockyard {__version__}, langgraph {version('langgraph')}, "
            f"psycopg {psycopg.__version__}, httpx {httpx.__version__}, Postgres {server[0] if server else '?'} "
            f"(fsync off: throw-away cluster of tests/support/postgres.py), SQLite {sqlite3.sqlite_version}",
            f"settings: {RUNS} runs per sample, {IN_FLIGHT} in flight, {rounds(ROUNDS)} rounds (+1 warm-up), "
            f"{STEPS} steps x mock {DELAY_MS} ms (ideal {STEPS * DELAY_MS} ms per run), "
            f"server.max_concurrent_runs {max(IN_FLIGHT, TAKEOVER_RUNS) * 2}, server.lease_seconds {LEASE:g}",
        ]
    )


async def main() -> None:
    processes = Processes()
    cluster: postgres.Cluster | None = None

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does (the finally below)

    signal.signal(signal.SIGTERM, interrupted)
    began = time.monotonic()
    try:
        cluster = postgres.start()
        print(f"# blockyard serve replicas on one Postgres database\n\n{machine(cluster)}")
        variants = await throughput(cluster, processes)
        print(
            f"\n## Throughput: {RUNS} runs per sample, round-robin over the replicas, {IN_FLIGHT} in flight; "
            "medians of interleaved rounds\n"
        )
        print(throughput_table(variants))
        processes.close()
        result = await takeover(cluster, processes)
        how = (
            "A in its own UTS namespace (another host name): B waits for A's lease to run out"
            if result["other_host"]
            else "A on the same host: B sees A's pid gone on its next lease round (every lease/3)"
        )
        print(
            f"\n## Takeover: 2 replicas, server.lease_seconds {LEASE:g} (heartbeat and takeover round every "
            f"{LEASE / 3:.2f} s), {result['runs']} runs of {STEPS} x {TAKEOVER_DELAY_MS} ms started on A, "
            f"A killed with SIGKILL after each finished a step\n\n{how}; {result['victims']} runs left "
            f"unfinished by A, steps finished twice: {result['repeated']}\n"
        )
        print(takeover_table(result))
        print(
            f"\n## For the README (measured {datetime.now().date().isoformat()}; "
            f"{os.cpu_count()} cpus, {cpu_model()})\n"
        )
        print(readme_table(variants, result))
        print(f"\n(the whole measurement took {time.monotonic() - began:.0f} s)")
    except BaseException:
        if processes.roots:
            print(f"servers' logs kept in {', '.join(map(str, processes.roots))}", file=sys.stderr)
        raise
    else:
        for root in processes.roots:
            shutil.rmtree(root, ignore_errors=True)
    finally:
        processes.close()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
