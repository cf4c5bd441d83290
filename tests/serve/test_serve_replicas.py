"""Several `blockyard serve` replicas on one Postgres database (docs/postgres.md, "Replicas").

Three real server processes share a database; runs go to all of them; one is killed with
SIGKILL while its runs are mid-flight, and the others take those runs over once its lease is
gone, from their last checkpoint: every run finishes exactly once and no finished step runs
again. A gate decided on one replica goes on there, whoever started the run; each schedule fire
time is claimed by one server only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.core.events import RunStatus
from engine.serve.catalog import load_catalog
from engine.serve.clock import ManualClock
from engine.serve.schedules import Scheduler, ScheduleStore, schedule_key
from engine.state import liveness
from engine.state.location import URL_ENV, Location, locate
from engine.state.store import RunRecord, effective_status
from tests.conftest import test_backend
from tests.serve.serve_helpers import (
    ADDER,
    GATED_FLOW,
    Live,
    ServeProcess,
    free_socket,
    is_up,
    read_sse,
    stop_all,
    wait_for,
)
from tests.serve.serve_helpers import YARD as SSE_YARD
from tests.serve.test_serve_sse import SLOW_TYPES, STREAM
from tests.support import processes
from tests.support.state import state_db

REPO = Path(__file__).resolve().parents[2]
# fewer for a quick look: BLOCKYARD_REPLICA_RUNS=60
RUNS = int(os.environ.get("BLOCKYARD_REPLICA_RUNS", "300"))
STEPS = ("s1", "w1", "s2", "w2", "s3")

YARD = {
    "blockyard.yaml": """
        server:
          max_concurrent_runs: 500
          lease_seconds: 1.5
    """,
    "blocks/adder.yaml": ADDER,
    "blocks/nap.yaml": """
        block: nap
        version: 1
        kind: wait
        duration: 400ms
    """,
    "flows/chain.yaml": """
        flow: chain
        version: 1
        inputs: {a: {type: integer, default: 1}}
        outputs: [total]
        steps:
          - {id: s1, uses: adder, with: {x: "{{ inputs.a }}", y: 1}}
          - {id: w1, uses: nap}
          - {id: s2, uses: adder, with: {x: "{{ context.total }}", y: 1}}
          - {id: w2, uses: nap}
          - {id: s3, uses: adder, with: {x: "{{ context.total }}", y: 1}}
    """,
    "flows/gated.yaml": GATED_FLOW,
    # missed while no server ran (see `replicas`): each replica finds the missed fire time at start
    "flows/tick.yaml": """
        flow: tick
        version: 1
        outputs: [total]
        schedule: {cron: "0 7 * * *", timezone: UTC, misfire: run_once}
        steps:
          - {id: one, uses: adder, with: {x: 1, y: 1}}
    """,
}


@pytest.fixture
def replicas(
    make_yard: Callable[[dict[str, str]], Path], pg_url: str, tmp_path: Path
) -> Iterator[tuple[Path, list[ServeProcess]]]:
    if test_backend() != "postgres":
        # the replicas use their own database (pg_url) in either pass: once is enough
        pytest.skip("three replicas on one Postgres database: run in the Postgres pass (.ci/test)")
    root = make_yard(YARD)
    # the schedule was first seen two days ago and never fired: every replica sees a missed fire time
    entry = load_catalog(root).flows["tick"]
    assert entry.bundle.flow.schedule is not None
    ScheduleStore(Location(root / ".blockyard" / "state.db", pg_url)).seen(
        "tick", datetime.now(UTC) - timedelta(days=2), schedule_key(entry.bundle.flow.schedule)
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), URL_ENV: pg_url}
    env.pop("BLOCKYARD_TOKEN", None)
    started: list[ServeProcess] = []
    try:
        for index in range(3):
            sock = free_socket()
            port = sock.getsockname()[1]
            sock.close()
            log = tmp_path / f"replica{index}.log"
            with log.open("w") as err:
                process = processes.Popen(
                    [
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
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    text=True,
                    env=env,
                )
            started.append(ServeProcess(process, f"http://127.0.0.1:{port}", log))
        for replica in started:
            wait_for(lambda r=replica: is_up(r.url), timeout=60, interval=0.1)  # type: ignore[misc]
        yield root, started
    finally:
        stop_all(started)


def _runs(root: Path) -> dict[str, tuple[str, int]]:
    """run id -> (stored status, how many times it started) of the `chain` runs, read from the database."""
    with state_db(root) as conn:
        rows = conn.execute(
            "SELECT r.id, r.status, (SELECT COUNT(*) FROM events e WHERE e.run_id = r.id "
            "AND e.type = 'run_started') FROM runs r WHERE r.flow = 'chain'"
        ).fetchall()
    return {run_id: (status, int(starts)) for run_id, status, starts in rows}


def _explain(root: Path, run_ids: set[str], owned: list[list[str]]) -> str:
    with state_db(root) as conn:
        lines = [
            f"{run_id} (replica {[i for i, ids in enumerate(owned) if run_id in ids]}): "
            + ", ".join(
                f"{t}:{step or ''}"
                for t, step in conn.execute(
                    "SELECT type, step FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
                ).fetchall()
            )
            for run_id in sorted(run_ids)
        ]
    return "\n".join(lines)


def _finished_s1(root: Path, run_ids: set[str]) -> int:
    with state_db(root) as conn:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM events WHERE type = 'step_finished' AND step = 's1' "
                f"AND run_id IN ({', '.join('?' for _ in run_ids)})",
                tuple(run_ids),
            ).fetchone()[0]
        )


def test_three_replicas_finish_every_run_once_when_one_is_killed(
    replicas: tuple[Path, list[ServeProcess]], pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, servers = replicas
    monkeypatch.setenv(URL_ENV, pg_url)  # this test reads the replicas' database
    began = time.monotonic()
    owned: list[list[str]] = [[], [], []]
    clients = [replica.client() for replica in servers]
    try:
        for n in range(RUNS):
            index = n % 3
            accepted = clients[index].post(
                "/flows/chain/runs?wait=false", json={"inputs": {"a": n}}
            )
            assert accepted.status_code == 202, accepted.text
            owned[index].append(accepted.json()["run_id"])
        # every run recorded, and the first replica's runs mid-flight: kill it then
        victim = set(owned[0])
        wait_for(lambda: len(_runs(root)) == RUNS, timeout=60, interval=0.05)
        wait_for(lambda: _finished_s1(root, victim) >= 1, timeout=60, interval=0.02)
        servers[0].process.send_signal(signal.SIGKILL)
        servers[0].process.wait(timeout=30)
        killed_at = time.monotonic()

        def all_finished() -> bool:
            return all(status == RunStatus.FINISHED for status, _ in _runs(root).values())

        wait_for(all_finished, timeout=120, interval=0.1)
        continued_after = time.monotonic() - killed_at
        runs = _runs(root)
        assert set(runs) == {run_id for ids in owned for run_id in ids}
        # the killed replica's unfinished runs were taken over (a second execution, which runs only
        # what had not finished), the others ran once
        twice = {run_id for run_id, (_, starts) in runs.items() if starts > 1}
        assert twice, "the killed replica had no run mid-flight"
        assert twice <= victim, _explain(root, twice - victim, owned)
        assert all(starts <= 2 for _, starts in runs.values())
        with state_db(root) as conn:
            finished = conn.execute(
                "SELECT run_id, step, COUNT(*) FROM events WHERE type = 'step_finished' "
                "AND run_id IN (SELECT id FROM runs WHERE flow = 'chain') "
                "GROUP BY run_id, step"
            ).fetchall()
            outputs = dict(conn.execute("SELECT id, outputs FROM runs").fetchall())
        per_step = {(run_id, step): count for run_id, step, count in finished}
        assert all(count == 1 for count in per_step.values()), _explain(
            root, {run_id for (run_id, _), count in per_step.items() if count != 1}, owned
        )
        assert len(per_step) == RUNS * len(STEPS)  # every step of every run finished exactly once
        assert all(
            outputs[run_id] == f'{{"total":{n + 3}}}'
            for n, run_id in [(n, owned[n % 3][n // 3]) for n in range(RUNS)]
        )
        # the survivors went on running within a bounded time (the lease is 1.5 s here)
        assert continued_after < 60

        # a gate: started on one replica, decided on another, which finishes the run
        waiting = clients[1].post("/flows/gated/runs", json={"inputs": {"a": 4}}).json()
        assert waiting["status"] == "waiting", waiting
        decided = clients[2].post(
            f"/runs/{waiting['run_id']}/resume", json={"approve": True, "values": {"b": 3}}
        )
        assert decided.status_code == 200 and decided.json()["outputs"] == {"total": 7}, (
            decided.text
        )
        again = clients[1].post(
            f"/runs/{waiting['run_id']}/resume", json={"approve": True, "values": {"b": 9}}
        )
        assert again.status_code == 409  # the decision was taken once, on the other replica
        assert clients[1].get(f"/runs/{waiting['run_id']}").json()["status"] == "finished"

        # the missed fire time was fired by one replica only
        with state_db(root) as conn:
            ticks = conn.execute("SELECT id, status FROM runs WHERE flow = 'tick'").fetchall()
        assert [status for _, status in ticks] == [RunStatus.FINISHED], ticks
    finally:
        for client in clients:
            client.close()
    took_over = [
        line
        for replica in servers[1:]
        for line in replica.log.read_text().splitlines()
        if "event=run_taken_over" in line
    ]
    taken = {line.split(" run=")[1].split()[0] for line in took_over}
    # the survivors log every run they took over, and only the killed one's
    assert twice <= taken <= victim
    assert time.monotonic() - began < 300


def _leased(replica: str | None, lease_until: float | None) -> RunRecord:
    return RunRecord(
        id="r",
        flow="f",
        version=1,
        digest="d",
        status=RunStatus.RUNNING,
        inputs={},
        owner_pid=1,
        owner_host="elsewhere",
        owner_start=None,
        owner_replica=replica,
        lease_until=lease_until,
    )


def test_a_run_on_another_host_is_alive_until_its_lease_runs_out() -> None:
    assert effective_status(_leased("a", time.time() + 30)) == RunStatus.RUNNING
    assert effective_status(_leased("a", time.time() - 1)) == RunStatus.INTERRUPTED
    # no lease: presumed alive, as before
    assert effective_status(_leased(None, None)) == RunStatus.RUNNING
    # on this host the process says: a late heartbeat under load is no death
    me = liveness.current()
    mine = replace(
        _leased("a", time.time() - 1), owner_pid=me.pid, owner_host=me.host, owner_start=me.start
    )
    assert effective_status(mine) == RunStatus.RUNNING
    # no such process
    assert effective_status(replace(mine, owner_pid=2**22 + 17)) == RunStatus.INTERRUPTED


SCHEDULED = """
flow: add
version: 1
inputs: {a: {type: integer, default: 1}}
outputs: [total]
schedule: {cron: "0 7 * * *", timezone: UTC}
steps:
  - {id: sum, uses: adder, with: {x: "{{ inputs.a }}", y: 1}}
"""


def test_a_fire_time_fires_once_across_servers_sharing_the_database(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = make_yard({"blocks/adder.yaml": ADDER, "flows/add.yaml": SCHEDULED})
    catalog = load_catalog(root)
    assert catalog.ok, catalog.diagnostics
    location = locate(root / ".blockyard" / "state.db")  # the test's backend: the file, or Postgres
    fired: list[str] = []

    async def fire(entry: object, when: datetime) -> str:
        fired.append(when.isoformat())
        return f"run-{len(fired)}"

    async def body() -> None:
        clock = ManualClock(datetime(2026, 5, 4, 6, 0, tzinfo=UTC))
        servers = [
            Scheduler(ScheduleStore(location), clock, lambda: catalog, fire) for _ in range(3)
        ]
        await servers[0].tick(clock.now())  # the schedule is first seen
        for server in servers:
            server.states = await asyncio.to_thread(ScheduleStore(location).load)
        due = datetime(2026, 5, 4, 7, 0, 0, 200_000, tzinfo=UTC)
        results = await asyncio.gather(*(server.tick(due) for server in servers))
        assert sorted(len(names) for names in results) == [0, 0, 1]
        assert fired == ["2026-05-04T07:00:00+00:00"]
        later = await asyncio.gather(*(server.tick(due.replace(minute=1)) for server in servers))
        assert later == [[], [], []] and len(fired) == 1  # the same fire time, seen again: nothing

    asyncio.run(body())


def test_a_follower_on_another_replica_is_woken_by_notify_and_reconnects_losing_nothing(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    if test_backend() != "postgres":
        pytest.skip("LISTEN/NOTIFY is Postgres's: followers of a SQLite file poll it")
    root = make_yard(SSE_YARD)
    executing = serve(root, watch=False, schedules=False)
    # without a notification: 30 s per wait
    follower = serve(root, watch=False, schedules=False, poll=30.0)
    began = time.monotonic()
    with executing.client() as runs, follower.client() as client:
        run_id = runs.post("/flows/slow/runs?wait=false", json={"inputs": {}}).json()["run_id"]
        # recorded
        wait_for(lambda: client.get(f"/runs/{run_id}").status_code == 200, interval=0.01)
        with client.stream("GET", f"/runs/{run_id}/events", headers=STREAM) as response:
            first = read_sse(response, stop_after=2)  # then the connection drops mid-run
        with client.stream(
            "GET", f"/runs/{run_id}/events", headers={**STREAM, "Last-Event-ID": first[-1]["id"]}
        ) as response:
            second = read_sse(response)
        received = [m["data"] for m in first + second]
        assert [e["type"] for e in received] == SLOW_TYPES
        assert [e["seq"] for e in received] == list(range(1, len(SLOW_TYPES) + 1))
        assert (
            received
            == runs.get(f"/runs/{run_id}/events", headers={"Accept": "application/json"}).json()[
                "events"
            ]
        )
    assert time.monotonic() - began < 10, (
        "the follower waited for its poll: no notification woke it"
    )
