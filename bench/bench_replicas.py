"""`blockyard serve` replicas on one Postgres database (docs/postgres.md, "Measuring replicas").

    python bench/bench_replicas.py              # 1,000 runs per sample, BENCH_ROUNDS=2 rounds: ~10 minutes
    python bench/bench_replicas.py 100          # runs per sample from argv (or BENCH_RUNS): ~2 minutes
    BENCH_IN_FLIGHT=64 BENCH_LEASE=3 BENCH_TAKEOVER_RUNS=20 python bench/bench_replicas.py

Needs Debian's `postgresql` package (initdb, pg_ctl): a throw-away cluster is started in a temporary
folder by the tests' helper (tests/support/postgres.py) and removed at the end.

1. Throughput: 1, 2 and 3 replicas (real `python -m engine serve` processes on 127.0.0.1, each with
   BLOCKYARD_DATABASE_URL set to one database per variant) run a 5-step flow whose mock model waits
   50 ms per call. RUNS runs per sample are posted (`POST /flows/five/runs`, which answers when the
   run has finished) round-robin across the replicas, at most IN_FLIGHT at once (httpx, this
   process). Reported: runs per second (RUNS / wall time of the sample) and p50/p95/p99 of the per-run
   latency (submit -> finished answer); medians over interleaved rounds (bench/_harness.py). Also the
   CPU per run of the server processes (user + system, from /proc), of the Postgres cluster's processes
   in the same sample, and the transactions Postgres committed per step of a run (`pg_stat_database`).
   Beside them, raw LangGraph: the same five 50 ms steps as hand-written nodes, on LangGraph's
   AsyncPostgresSaver over a psycopg connection pool (what its docs show for concurrent use), in a
   process of its own driven at the same concurrency (IN_FLIGHT runs at once, RUNS per sample), with
   its CPU and the cluster's measured the same way. Both sides at the same guarantee: the throw-away
   cluster runs with fsync and synchronous_commit off, so neither waits for a disk.
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

4. What one primary bounds: the commits per second this cluster takes from 16 clients each committing a
   one-row INSERT (pgbench, 8 s; CPU-bound here, the cluster has fsync off), and the flushes per second
   this machine's disk makes (pg_test_fsync's fdatasync of one 8 kB write, beside the cluster's folder):
   with each commit waiting for the disk (`synchronous: full`), a primary commits at most one WAL flush
   per such interval, each carrying every commit that waits. Divided by the commits per step measured
   in 1, they bound the steps per second one primary serves.

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
# the defaults take about 10 minutes on a quiet 2-core machine; 100 runs per sample about 2
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("BENCH_RUNS", 1000))
IN_FLIGHT = int(os.environ.get("BENCH_IN_FLIGHT", 64))
LEASE = float(os.environ.get("BENCH_LEASE", 3))
TAKEOVER_RUNS = int(os.environ.get("BENCH_TAKEOVER_RUNS", 12))
ROUNDS = 2  # default of BENCH_ROUNDS
STEPS = 5
DELAY_MS = 50
TAKEOVER_DELAY_MS = 500
RAW_NAME = "raw LangGraph + AsyncPostgresSaver (pool), 1 process"


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
    raw: RawVariant | None = None  # the raw LangGraph process, stopped with the servers
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
        if self.raw is not None:
            self.raw.close()
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


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_cpu(cluster: postgres.Cluster | None) -> float:
    """The CPU seconds so far of the cluster's postmaster and its children (backends, WAL writer, ...)."""
    if cluster is None:
        return 0.0
    try:
        postmaster = int((cluster.folder / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    total = process_cpu(postmaster)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                total += process_cpu(int(entry.name))
    return total


@contextlib.contextmanager
def cpu_of(pids: list[int], cluster: postgres.Cluster | None) -> Any:
    """[the CPU seconds `pids` spent in the block, the cluster's], filled in as the block ends."""
    spent = [0.0, 0.0]
    before = sum(process_cpu(pid) for pid in pids), cluster_cpu(cluster)
    yield spent
    spent[0] = sum(process_cpu(pid) for pid in pids) - before[0]
    spent[1] = cluster_cpu(cluster) - before[1]


def committed(url: str) -> int:
    """Transactions committed in the database of `url` so far (Postgres's cumulative statistics)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


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
    url: str | None = None  # its Postgres database
    cluster: postgres.Cluster | None = None
    cpu: list[float] = field(default_factory=list)  # the servers' CPU seconds per run, per sample
    database_cpu: list[float] = field(default_factory=list)  # the cluster's, per run, per sample
    commits: float = 0.0  # transactions the database committed per step of a run, over every sample

    def pids(self) -> list[int]:
        return [r.process.pid for r in self.replicas]

    async def sample(self) -> float:
        with cpu_of(self.pids(), self.cluster) as spent:
            wall = await self.load()
        self.cpu.append(spent[0] / RUNS)
        self.database_cpu.append(spent[1] / RUNS)
        return wall

    async def load(self) -> float:
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


@dataclass
class RawVariant(Variant):
    """Raw LangGraph on AsyncPostgresSaver: its process runs a sample when told on stdin."""

    process: subprocess.Popen[str] | None = None

    def pids(self) -> list[int]:
        assert self.process is not None
        return [self.process.pid]

    def start(self, url: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("raw_postgres.py")),
                url,
                str(STEPS),
                str(DELAY_MS / 1000),
                str(RUNS),
                str(IN_FLIGHT),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("raw LangGraph on AsyncPostgresSaver did not start")

    async def load(self) -> float:
        assert self.process is not None and self.process.stdin and self.process.stdout
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        answer = (await asyncio.to_thread(self.process.stdout.readline)).split()
        if not answer:
            raise RuntimeError("raw LangGraph on AsyncPostgresSaver stopped")
        wall, *latencies = map(float, answer)
        self.latencies.append(latencies)
        self.walls.append(wall)
        return wall

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


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
        variants.append(Variant(name, backend, started, url=url, cluster=cluster))
    raw = RawVariant(RAW_NAME, "postgres", [], url=cluster.fresh_database(), cluster=cluster)
    assert raw.url is not None
    raw.start(raw.url)
    processes.raw = raw
    variants.append(raw)
    processes.wait_up([r for v in variants for r in v.replicas])
    # the transactions of setting up (migrations, LangGraph's tables) are not the runs'
    before = {v.name: committed(v.url) for v in variants if v.url is not None}
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
    await asyncio.sleep(2)  # Postgres's statistics reach pg_stat_database within a second
    for variant in variants:
        if variant.url is not None:
            steps = RUNS * (rounds(ROUNDS) + 1) * STEPS  # the warm-up's runs committed too
            variant.commits = (committed(variant.url) - before[variant.name]) / steps
    for variant in variants:  # the warm-up sample is not reported
        del variant.latencies[0], variant.walls[0], variant.cpu[0], variant.database_cpu[0]
    return variants


def throughput_table(variants: list[Variant]) -> str:
    rows = []
    raw = next((v for v in variants if v.name == RAW_NAME), None)
    for v in variants:
        rate = median([RUNS / wall for wall in v.walls])
        p50, p95, p99 = (
            median([percentile(s, q) for s in v.latencies if s]) for q in (0.5, 0.95, 0.99)
        )
        cpu, database = median(v.cpu), median(v.database_cpu)
        versus = f" ({cpu / median(raw.cpu):.2f}x raw)" if raw is not None and v is not raw else ""
        rows.append(
            [
                v.name,
                f"{rate:.1f}",
                f"{p50 * 1000:.0f} ms",
                f"{p95 * 1000:.0f} ms",
                f"{p99 * 1000:.0f} ms",
                f"{cpu * 1000:.1f} ms{versus}",
                f"{database * 1000:.1f} ms" if v.backend == "postgres" else "-",
                f"{v.commits:.2f}" if v.url is not None else "-",
                str(v.errors),
            ]
        )
    return table(
        [
            "variant",
            "runs/s",
            "p50",
            "p95",
            "p99",
            "CPU per run (servers)",
            "CPU per run (Postgres)",
            "commits per step",
            "errors",
        ],
        rows,
    )


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


# ---- 4: what one primary bounds -------------------------------------------------------------------


def primary_bounds(cluster: postgres.Cluster) -> dict[str, float]:
    """Commits/s of tiny transactions from 16 clients (pgbench, on a fresh database) and fdatasync/s of
    one 8 kB write on this disk (pg_test_fsync); 0 where a tool is missing."""
    found: dict[str, float] = {"commits_per_s": 0.0, "fsyncs_per_s": 0.0}
    pgbench = postgres._binary("pgbench")
    if pgbench is not None:
        url = cluster.fresh_database()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_commits (n integer)")
        script = cluster.folder.parent / f"{cluster.folder.name}-pgbench.sql"
        script.write_text("INSERT INTO bench_commits VALUES (1);\n", encoding="utf-8")
        done = subprocess.run(
            [pgbench, "-n", "-c", "16", "-j", "2", "-T", "8", "-f", str(script), url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        script.unlink(missing_ok=True)
        for line in done.stdout.splitlines():
            if line.startswith("tps ="):
                found["commits_per_s"] = float(line.split()[2])
    test_fsync = postgres._binary("pg_test_fsync")
    if test_fsync is not None:
        target = cluster.folder.parent / f"{cluster.folder.name}-fsync.test"
        done = subprocess.run(
            [test_fsync, "-s", "2", "-f", str(target)], capture_output=True, text=True, timeout=300
        )
        target.unlink(missing_ok=True)
        lines = done.stdout.splitlines()
        with contextlib.suppress(StopIteration, ValueError, IndexError):
            first = next(i for i, line in enumerate(lines) if "one 8kB write" in line)
            line = next(line for line in lines[first:] if line.strip().startswith("fdatasync"))
            found["fsyncs_per_s"] = float(line.split()[1])
    return found


def bounds_table(found: dict[str, float], variants: list[Variant]) -> str:
    rows = []
    for v in variants:
        if v.url is None or not v.commits:
            continue
        rows.append(
            [
                v.name,
                f"{v.commits:.2f}",
                f"{found['commits_per_s'] / v.commits:,.0f}" if found["commits_per_s"] else "-",
            ]
        )
    return table(
        ["variant", "commits per step", "steps/s one primary bounds (CPU-bound commits)"], rows
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
        if one is not None and v is not one and v.backend == "postgres" and v.replicas:
            scale = f", {rate / median([RUNS / wall for wall in one.walls]):.2f}x of 1 replica"
        kind = "" if not v.replicas else " (`blockyard serve` processes)"
        what = (
            f"{v.name}{kind}, {STEPS}-step flow, mock model {DELAY_MS} ms per call, "
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
        found = primary_bounds(cluster)
        print(
            f"\n## What one primary bounds\n\ncommits/s of one-row transactions from 16 clients (pgbench, "
            f"fsync off: CPU-bound on this machine): {found['commits_per_s']:,.0f}; fdatasync/s of one 8 kB "
            f"write on this disk (pg_test_fsync): {found['fsyncs_per_s']:,.0f} (with `synchronous: full` "
            "each WAL flush carries every commit waiting for it)\n"
        )
        print(bounds_table(found, variants))
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
