"""A run whose execution an error ended before the runtime recorded its end (docs/serve.md, "Runs that
could not be executed"; engine/serve/server.py, `_record_unended`).

The server records a run before it answers (`running` under itself, or `queued`). When the execution
then fails before the runtime begins it — its context cannot be built, the database fails — nothing
records the run's end. The row must not stay `running` under a live server (no client, replica or
`resume` could ever go on with it):
- the server records it `failed`, with the error, held by nobody, and it resumes from its inputs;
- should that write fail too, the replica's heartbeat does not keep the orphaned row's lease alive
  (it renews only the runs the server holds), so another replica takes it over once the lease ends.

Each test runs on the backend of the pass (SQLite file, or the pass's Postgres database).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.runtime.engine import Engine
from engine.state.database import StateError
from tests.serve import serve_helpers
from tests.serve.serve_helpers import Live, wait_for
from tests.support.state import state_db

# the add run fails as it begins, beside a long one the server holds (30 s): two slots
YARD = {
    **serve_helpers.YARD,
    "blockyard.yaml": "server: {lease_seconds: 0.9, max_concurrent_runs: 2}\n",
    "blocks/nap.yaml": "block: nap\nversion: 1\nkind: wait\nduration: 30s\n",
    "flows/long.yaml": "flow: long\nversion: 1\nsteps:\n  - {id: nap, uses: nap}\n",
}
LOST = "the state database cannot be used: the connection was lost"


def _context_fails_for(engine: Engine, flow: str) -> None:
    """The next run of `flow` fails as its context is built (what a lost database does there)."""
    build = engine.context

    def context(bundle: Any, *args: Any, **kwargs: Any) -> Any:
        if bundle.name == flow:
            engine.context = build  # type: ignore[method-assign]  # once
            raise StateError(LOST)
        return build(bundle, *args, **kwargs)

    engine.context = context  # type: ignore[method-assign]


def _owner(root: Path, run_id: str) -> tuple[str, Any, Any, Any]:
    with state_db(root) as conn:
        status, pid, replica, lease = conn.execute(
            "SELECT status, owner_pid, owner_replica, lease_until FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
    return str(status), pid, replica, lease


def test_a_run_whose_execution_could_not_begin_is_recorded_failed_and_resumes(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard(YARD)
    live = serve(root, watch=False, schedules=False, replica=True)
    assert live.server.service is not None
    _context_fails_for(live.server.service.engine, "add")
    with live.client() as client:
        accepted = client.post("/flows/add/runs?wait=false", json={"inputs": {"a": 2}})
        assert (accepted.status_code, accepted.json()["status"]) == (202, "running"), accepted.text
        run_id = accepted.json()["run_id"]
        wait_for(lambda: client.get(f"/runs/{run_id}").json()["status"] != "running", timeout=30)
        shown = client.get(f"/runs/{run_id}").json()
        assert shown["status"] == "failed", shown
        assert shown["error"] == f"the server could not execute the run: StateError: {LOST}"
        assert shown["finished"] is not None
        assert _owner(root, run_id) == ("failed", None, None, None)  # held by nobody
        # failed, not lost: it goes on (from its inputs: it never began) once the database is back
        resumed = client.post(f"/runs/{run_id}/resume?wait=true", json={})
        assert resumed.status_code == 200, resumed.text
        assert (resumed.json()["status"], resumed.json()["outputs"]) == ("finished", {"total": 4})


def test_the_heartbeat_renews_only_the_runs_the_server_holds(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard(YARD)
    live = serve(root, watch=False, schedules=False, replica=True, grace=0.1)
    service = live.server.service
    assert service is not None

    async def unrecorded(
        run_id: str, error: str
    ) -> None:  # the database is still gone as the end is recorded
        raise StateError(LOST)

    service.record_unended = unrecorded  # type: ignore[method-assign]
    _context_fails_for(service.engine, "add")
    with live.client() as client:
        held = client.post("/flows/long/runs?wait=false", json={}).json()[
            "run_id"
        ]  # runs 30 s: held
        orphan = client.post("/flows/add/runs?wait=false", json={"inputs": {"a": 2}}).json()[
            "run_id"
        ]
        wait_for(
            lambda: orphan not in live.server.queue.jobs if live.server.queue else False, timeout=30
        )
    status, _, replica, lease = _owner(root, orphan)
    assert (status, replica) == ("running", _owner(root, held)[2])  # left under this replica
    first = _owner(root, held)[3]
    # heartbeats since, a lease's worth
    wait_for(lambda: _owner(root, held)[3] > first + 0.9, timeout=30)
    # they left the orphaned row's lease alone, to run out: another replica takes the run over
    assert _owner(root, orphan) == ("running", _owner(root, held)[1], replica, lease)
