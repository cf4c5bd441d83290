"""Crons over the LangGraph API (docs/langgraph-api.md, "Crons"), with langgraph-sdk: made, listed, changed
and deleted; fired by the server's scheduler on a clock the test moves (a thread's cron starts turns of
that thread, a cron without one runs without one); each fire time once across servers sharing the
database; refused when the yard keeps every schedule in Git (`server.api_crons: false`); and listed by
`blockyard schedules` beside the flows' schedules, with their origin."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from engine.cli.serve import schedules_command
from engine.serve.catalog import load_catalog
from engine.serve.clock import ManualClock
from engine.serve.schedules import Scheduler, ScheduleStore
from engine.state import crons
from engine.state.backends import transaction
from engine.state.location import locate
from tests.serve.langgraph_api.conftest import example_yard
from tests.serve.serve_helpers import Live, wait_for

START = datetime(2026, 5, 4, 6, 0, 30, tzinfo=UTC)


def _client(live: Live) -> Any:  # the SDK's TypedDict answers are looser than what the tests read
    return get_sync_client(url=live.url + "/lg")


def _refused(call: Callable[[], Any], status: int, match: str) -> None:
    with pytest.raises(httpx.HTTPStatusError, match=match) as caught:
        call()
    assert caught.value.response.status_code == status, caught.value.response.text


@pytest.fixture
def clocked(tmp_path: Path, serve: Callable[..., Live]) -> tuple[Live, ManualClock]:
    clock = ManualClock(START)
    root = example_yard(tmp_path / "yard")
    return serve(root, watch=False, schedules=True, clock=clock), clock


def _runs(live: Live, flow: str) -> list[dict[str, Any]]:
    with live.client() as client:
        found: list[dict[str, Any]] = client.get("/runs", params={"flow": flow}).json()["runs"]
    return found


def test_crons_are_made_listed_changed_and_deleted(clocked: tuple[Live, ManualClock]) -> None:
    live, _clock = clocked
    client = _client(live)
    thread = client.threads.create()["thread_id"]
    daily = client.crons.create(
        "hello", schedule="0 9 * * *", input={"name": "Ada"}, timezone="Europe/Paris"
    )
    assert daily["assistant_id"] == "hello" and daily["thread_id"] is None
    assert daily["schedule"] == "0 9 * * *" and daily["timezone"] == "Europe/Paris"
    assert daily["payload"] == {"input": {"name": "Ada"}} and daily["enabled"] is True
    assert daily["next_run_date"].endswith(":00+00:00")
    turns = client.crons.create_for_thread(
        thread, "hello", schedule="*/5 * * * *", input={"name": "Bo"}, metadata={"team": "x"}
    )
    assert turns["thread_id"] == thread and turns["metadata"] == {"team": "x"}
    assert {c["cron_id"] for c in client.crons.search()} == {daily["cron_id"], turns["cron_id"]}
    assert [c["cron_id"] for c in client.crons.search(thread_id=thread)] == [turns["cron_id"]]
    assert client.crons.count(assistant_id="hello") == 2
    changed = client.crons.update(turns["cron_id"], schedule="*/10 * * * *", enabled=False)
    assert changed["schedule"] == "*/10 * * * *" and changed["enabled"] is False
    assert changed["next_run_date"] is None
    retagged = client.http.patch(
        f"/runs/crons/{turns['cron_id']}", json={"metadata": {"team": "y"}, "input": {"name": "Cy"}}
    )
    assert retagged["metadata"] == {"team": "y"} and retagged["enabled"] is False
    assert retagged["payload"] == {"input": {"name": "Cy"}, "metadata": {"team": "y"}}
    client.crons.delete(daily["cron_id"])
    assert [c["cron_id"] for c in client.crons.search()] == [turns["cron_id"]]
    _refused(
        lambda: client.crons.delete(daily["cron_id"]), 404, f"unknown cron '{daily['cron_id']}'"
    )
    # judged before anything is kept
    _refused(
        lambda: client.crons.create("hello", schedule="61 * * * *", input={"name": "x"}),
        422,
        "minute '61' is not valid",
    )
    _refused(
        lambda: client.crons.create("hello", schedule="@daily", timezone="Mars/Base"),
        422,
        "unknown time zone 'Mars/Base'",
    )
    _refused(
        lambda: client.crons.create("hello", schedule="@daily", input={"bogus": 1}), 422, "bogus"
    )
    _refused(lambda: client.crons.create("nope", schedule="@daily"), 404, "unknown flow 'nope'")
    _refused(
        lambda: client.crons.create_for_thread("no-such", "hello", schedule="@daily"),
        404,
        "unknown thread 'no-such'",
    )
    _refused(
        lambda: client.crons.create(
            "hello", schedule="@daily", input={"name": "x"}, webhook="http://169.254.169.254/x"
        ),
        422,
        "not in http.allowed_hosts",
    )
    assert client.crons.count() == 1


def test_a_cron_fires_on_time_a_thread_turn_or_a_run(clocked: tuple[Live, ManualClock]) -> None:
    live, clock = clocked
    client = _client(live)
    thread = client.threads.create()["thread_id"]
    client.crons.create_for_thread(thread, "hello", schedule="0 * * * *", input={"name": "Ada"})
    client.crons.create("hello", schedule="30 * * * *", input={"name": "Bo"})
    # the scheduler sees them (first seen: nothing was missed), then the clock passes 07:00 and 07:30
    assert wait_for(lambda: any(when > START for when in clock.sleeping()))
    clock.set(datetime(2026, 5, 4, 7, 0, 1, tzinfo=UTC))
    assert wait_for(lambda: len(client.runs.list(thread)) == 1)
    clock.set(datetime(2026, 5, 4, 7, 30, 1, tzinfo=UTC))
    assert wait_for(lambda: len(_runs(live, "hello")) == 2)
    by_thread = {run["thread_id"]: run for run in _runs(live, "hello")}
    assert set(by_thread) == {thread, None}
    assert wait_for(lambda: client.runs.list(thread)[0]["status"] == "success")
    assert client.threads.get_state(thread)["values"]["name"] == "Ada"
    with live.client() as raw:
        alone = raw.get(f"/runs/{by_thread[None]['id']}").json()
    assert alone["inputs"] == {"name": "Bo"}


def test_a_cron_fire_time_fires_once_across_servers(tmp_path: Path) -> None:
    root = example_yard(tmp_path / "yard")
    catalog = load_catalog(root)
    location = locate(root / ".blockyard" / "state.db")  # the test's backend: the file, or Postgres
    made = crons.ApiCron("c1", "hello", None, "0 * * * *", "UTC", {"inputs": {"name": "x"}})
    write = crons.save(made)
    with transaction(location) as conn:
        conn.execute(write.sql, write.params)
    fired: list[str] = []

    async def nothing(entry: object, when: datetime) -> str | None:
        return None

    async def fire_cron(cron: crons.ApiCron, when: datetime) -> str:
        fired.append(f"{cron.id} {when.isoformat()}")
        return f"run-{len(fired)}"

    async def body() -> None:
        clock = ManualClock(START)
        servers = [
            Scheduler(ScheduleStore(location), clock, lambda: catalog, nothing, fire_cron=fire_cron)
            for _ in range(3)
        ]
        await servers[0].tick(clock.now())  # first seen
        for server in servers:
            server.states = await asyncio.to_thread(ScheduleStore(location).load)
        due = datetime(2026, 5, 4, 7, 0, 0, 200_000, tzinfo=UTC)
        results = await asyncio.gather(*(server.tick(due) for server in servers))
        assert sorted(results) == [[], [], ["cron:c1"]]
        assert fired == ["c1 2026-05-04T07:00:00+00:00"]

    asyncio.run(body())


def test_a_yard_may_keep_every_schedule_in_git(tmp_path: Path, serve: Callable[..., Live]) -> None:
    root = example_yard(tmp_path / "yard")
    config = root / "blockyard.yaml"
    config.write_text(config.read_text() + "\nserver:\n  api_crons: false\n", encoding="utf-8")
    live = serve(root, watch=False, schedules=False)
    client = _client(live)
    assert client.http.get("/info")["flags"]["crons"] is False
    _refused(
        lambda: client.crons.create("hello", schedule="@daily", input={"name": "x"}),
        403,
        r"server.api_crons: false",
    )
    assert client.crons.search() == []


def test_blockyard_schedules_lists_api_crons_with_their_origin(
    clocked: tuple[Live, ManualClock], capsys: pytest.CaptureFixture[str]
) -> None:
    live, _clock = clocked
    made = _client(live).crons.create("hello", schedule="15 8 * * 1", input={"name": "Ada"})
    assert schedules_command(live.server.root, as_json=True) == 0
    rows = json.loads(capsys.readouterr().out)
    api = [row for row in rows if row["origin"] == "api"]
    assert [(row["flow"], row["cron"], row["cron_id"]) for row in api] == [
        ("hello", "15 8 * * 1", made["cron_id"])
    ]
    assert all(row["origin"] == "yaml" for row in rows if row not in api)
    assert schedules_command(live.server.root, as_json=False) == 0
    table = capsys.readouterr().out
    assert "ORIGIN" in table.splitlines()[0] and f"api {made['cron_id']}" in table
