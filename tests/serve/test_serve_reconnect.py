"""A server whose Postgres sessions the database ended (a restart, a failover, an administrator) goes on
serving without a restart: its writer, its reader and its LISTEN connection each open a new session
(docs/postgres.md, "A lost connection"). The same sessions lost under a replica frozen past the idle
timeout: tests/serve/test_serve_queue.py, `test_a_replica_that_lost_its_lease_writes_nothing_more_for_the_run`.

An execution that a failed state database ended (a `StateError` the runtime could not record) is logged
as what it was — `run_ended` with `status=interrupted` and the error — not as a refused run
(`run_rejected` stays for usage problems); either way the run's row is recorded `failed` while this
server still holds it (engine/serve/jobs.py; tests/serve/test_serve_unended.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine.core.errors import UsageError
from engine.serve.logs import LOGGER
from engine.state.database import StateError
from engine.state.location import URL_ENV
from tests.conftest import test_backend
from tests.serve.serve_helpers import YARD, Live, wait_for
from tests.support.state import state_db


def test_a_server_whose_sessions_the_database_ended_keeps_serving_runs(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    if test_backend() != "postgres":
        pytest.skip("about Postgres sessions: a SQLite file has none to lose")
    root = make_yard(YARD)
    live = serve(root, watch=False, schedules=False, replica=True)
    with live.client() as client:
        first = client.post("/flows/add/runs?wait=true", json={"inputs": {"a": 1}})
        assert first.status_code == 200 and first.json()["status"] == "finished", first.text
        with psycopg.connect(os.environ[URL_ENV], autocommit=True) as admin:
            # (in the select list: evaluated only for the rows the WHERE kept, never for this session)
            ended = [
                pid
                for pid, done in admin.execute(
                    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                ).fetchall()
                if done
            ]
        assert len(ended) >= 3, ended  # the writer's, the reader's, the listener's
        # recorded (the writer), executed, then shown and listed (the reader), all on new sessions
        second = client.post("/flows/add/runs?wait=true", json={"inputs": {"a": 5}})
        assert second.status_code == 200, second.text
        assert (second.json()["status"], second.json()["outputs"]) == ("finished", {"total": 7}), (
            second.text
        )
        shown = client.get(f"/runs/{first.json()['run_id']}")
        assert (shown.status_code, shown.json()["status"]) == (200, "finished"), shown.text
        listed = {run["id"] for run in client.get("/runs").json()["runs"]}
        assert listed == {first.json()["run_id"], second.json()["run_id"]}


@pytest.mark.parametrize(
    ("error", "logged"),
    [
        (StateError("the state database cannot be used: the connection is closed"), "run_ended"),
        (UsageError("the run cannot be executed"), "run_rejected"),
    ],
)
def test_an_execution_a_lost_database_ended_is_logged_interrupted_not_rejected(
    make_yard: Callable[[dict[str, str]], Path],
    serve: Callable[..., Live],
    caplog: pytest.LogCaptureFixture,
    error: Exception,
    logged: str,
) -> None:
    root = make_yard(YARD)
    live = serve(root, watch=False, schedules=False)
    assert live.server.service is not None
    engine = live.server.service.engine
    build = engine.context

    def context(
        bundle: Any, *args: Any, **kwargs: Any
    ) -> Any:  # as the run begins: the database fails
        engine.context = build  # type: ignore[method-assign]  # once
        raise error

    engine.context = context  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger=LOGGER), live.client() as client:
        run_id = client.post("/flows/add/runs?wait=false", json={"inputs": {"a": 1}}).json()[
            "run_id"
        ]
        wait_for(lambda: client.get(f"/runs/{run_id}").json()["status"] == "failed", timeout=30)
    # each line's key=value fields (engine/serve/logs.py, `fields`)
    lines = [(record.getMessage(), getattr(record, "kv", {})) for record in caplog.records]
    ends = [
        (message, kv)
        for message, kv in lines
        if message in ("run_ended", "run_rejected") and kv.get("run") == run_id
    ]
    assert [message for message, _ in ends] == [logged], lines
    assert ends[0][1]["error"] == f"{type(error).__name__}: {error}"
    if logged == "run_ended":
        assert ends[0][1]["status"] == "interrupted"
    with state_db(
        root
    ) as conn:  # recorded `failed` all the same: this server still held it (store.fail_unended)
        assert tuple(
            conn.execute("SELECT status, owner_pid FROM runs WHERE id = ?", (run_id,)).fetchone()
        ) == ("failed", None)
