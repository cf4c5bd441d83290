"""What runs spent, over HTTP on a real server: `usage` in the run and thread resources, `GET /stats`
(the report of `blockyard stats`), and the Prometheus `GET /metrics` — parsed with the client library's
own parser, its counters checked against the runs made and the model_call events they recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.core.usage import Spend
from tests.serve.serve_helpers import ADDER, Live, wait_for
from tests.support.cli import Cli
from tests.support.priced_yard import EXPLODE, FRAGILE, GREET, PRICED_MOCK, TOOLS, TOOLS_CONFIG
from tests.support.state import state_db

HELLO = """
flow: hello
version: 1
inputs: {name: {type: string, default: World}}
outputs: [greeting]
steps:
  - {id: greet, uses: greet, with: {name: "{{ inputs.name }}"}}
"""
GATED = """
flow: gated
outputs: [greeting]
steps:
  - {id: greet, uses: greet, with: {name: Bo}}
  - {id: ask, approval: {message: "Send it?"}}
"""
YARD = {
    "blockyard.yaml": f"models:\n  default: {PRICED_MOCK}\n{TOOLS_CONFIG}",
    "yardtools.py": TOOLS,
    "blocks/greet.yaml": GREET,
    "blocks/explode.yaml": EXPLODE,
    "flows/hello.yaml": HELLO,
    "flows/fragile.yaml": FRAGILE,
    "flows/gated.yaml": GATED,
}
TOKEN = "metrics-token"


@pytest.fixture
def root(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(YARD)


def start(client: httpx.Client, flow: str, **inputs: Any) -> dict[str, Any]:
    answer = client.post(f"/flows/{flow}/runs", json={"inputs": inputs})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def model_calls(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    events = client.get(f"/runs/{run_id}/events", headers={"Accept": "application/json"}).json()[
        "events"
    ]
    return [event["data"] for event in events if event["type"] == "model_call"]


def trace(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = client.get(
        f"/runs/{run_id}/events", headers={"Accept": "application/json"}
    ).json()["events"]
    return events


def spend(calls: list[dict[str, Any]]) -> Spend:
    total = Spend()
    for data in calls:
        total.add(data)
    return total


def usage(total: Spend) -> dict[str, Any]:
    """What the API shows for `total` (engine/state/stats.py, `usage_dict`): the mock here is always priced."""
    return {**total.as_dict(), "tokens": total.tokens, "cost": total.cost_text()}


def test_runs_and_threads_carry_their_usage(root: Path, serve: Callable[..., Live]) -> None:
    live = serve(root, watch=False, schedules=False)
    with live.client() as client:
        run_id = start(client, "hello", name="Ada")["run_id"]
        calls = model_calls(client, run_id)
        assert len(calls) == 1 and calls[0]["cost_usd"] > 0
        run = client.get(f"/runs/{run_id}").json()
        assert run["usage"] == usage(spend(calls))
        listed = {row["id"]: row for row in client.get("/runs").json()["runs"]}
        assert listed[run_id]["usage"] == run["usage"]

        assert client.post("/threads", json={"id": "chat", "flow": "hello"}).status_code == 201
        turns = []
        for message in ("Ada", "Bo"):
            answer = client.post("/threads/chat/runs", json={"inputs": {"name": message}})
            assert answer.status_code == 200, answer.text
            turns.append(answer.json()["run_id"])
        total = Spend()
        # a thread's turns are runs: its totals are theirs (its naming call included, if any)
        for turn in turns:
            total.merge(Spend.of(client.get(f"/runs/{turn}").json()["usage"]))
        assert total.model_calls >= 2
        thread = client.get("/threads/chat").json()
        assert thread["usage"] == usage(total)
        listed_threads = {row["id"]: row for row in client.get("/threads").json()["threads"]}
        assert listed_threads["chat"]["usage"] == usage(total)
        empty = client.post("/threads", json={"id": "quiet"}).json()
        assert empty["usage"] == usage(Spend()) and empty["usage"]["cost"] == "-"


def test_stats_answers_what_the_command_line_answers(
    root: Path, serve: Callable[..., Live], cli: Cli
) -> None:
    live = serve(root, watch=False, schedules=False)
    with live.client() as client:
        runs = [start(client, "hello", name=name)["run_id"] for name in ("Ada", "Bo")]
        assert start(client, "fragile")["status"] == "failed"
        report = client.get("/stats").json()
        assert report["window"] == "7d" and report["flow"] is None
        rows = {(row["flow"], row["version"]): row for row in report["versions"]}
        assert sorted(rows) == [("fragile", 1), ("hello", 1)]
        hello = rows[("hello", 1)]
        calls = [call for run_id in runs for call in model_calls(client, run_id)]
        assert (hello["runs"], hello["finished"], hello["failed"]) == (2, 2, 0)
        assert hello["cost_usd"] == pytest.approx(spend(calls).cost_usd)
        assert hello["usage"]["input_tokens"] == spend(calls).input_tokens
        assert rows[("fragile", 1)]["failure_rate"] == 1.0
        only = client.get("/stats", params={"flow": "hello", "since": "1h"}).json()
        assert [row["flow"] for row in only["versions"]] == ["hello"] and only["window"] == "1h"
        assert client.get("/stats", params={"since": "2999-01-01"}).json()["versions"] == []
        bad = client.get("/stats", params={"since": "forever"})
        assert bad.status_code == 422
        assert (
            bad.json()["error"]["code"] == "invalid_request"
            and bad.json()["error"]["field"] == "since"
        )
        assert "not a duration such as 7d" in bad.json()["error"]["message"]
    shown = json.loads(cli(root, "stats", "--json").out)
    assert shown["versions"] == report["versions"] and shown["flows"] == report["flows"]


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition, by name and labels (the client library's own parser)."""
    found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def _sum(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    wanted = set(labels.items())
    return sum(
        value for (sample, have), value in samples.items() if sample == name and wanted <= have
    )


def test_metrics_count_the_runs_made_behind_the_token(
    root: Path, serve: Callable[..., Live]
) -> None:
    live = serve(root, watch=False, schedules=False, token=TOKEN)
    with live.client() as anonymous:
        refused = anonymous.get("/metrics")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    with live.client(TOKEN) as client:
        made = [start(client, "hello", name=name) for name in ("Ada", "Bo")]
        made.append(start(client, "fragile"))
        gated = start(client, "gated")
        assert [r["status"] for r in [*made, gated]] == [
            "finished",
            "finished",
            "failed",
            "waiting",
        ]
        answer = client.get("/metrics")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        samples = _samples(answer.text)

        assert _sum(samples, "blockyard_runs_started_total", flow="hello", version="1") == 2
        assert _sum(samples, "blockyard_runs_started_total") == 4
        assert _sum(samples, "blockyard_runs_finished_total", flow="hello") == 2
        assert _sum(samples, "blockyard_runs_failed_total", flow="fragile", version="1") == 1
        assert _sum(samples, "blockyard_runs_failed_total", flow="hello") == 0
        assert _sum(samples, "blockyard_run_duration_seconds_count", flow="hello") == 2
        assert _sum(samples, "blockyard_runs_waiting", flow="gated") == 1
        assert (
            _sum(samples, "blockyard_queue_depth") == 0
            and _sum(samples, "blockyard_runs_running") == 0
        )
        assert _sum(samples, "blockyard_runs_taken_over_total") == 0

        traces = {run["run_id"]: trace(client, run["run_id"]) for run in [*made, gated]}
        calls = [
            event["data"]
            for events in traces.values()
            for event in events
            if event["type"] == "model_call"
        ]
        total = spend(calls)
        assert len(calls) == 4
        assert (
            _sum(
                samples, "blockyard_model_calls_total", provider="mock", model="mock", outcome="ok"
            )
            == 4
        )
        assert _sum(samples, "blockyard_model_call_duration_seconds_count") == 4
        for kind in ("input", "output"):  # the tokens are the sum of the model_call events
            assert _sum(samples, "blockyard_model_tokens_total", kind=kind) == getattr(
                total, f"{kind}_tokens"
            )
        assert _sum(samples, "blockyard_model_tokens_total", flow="hello", kind="input") == sum(
            event["data"]["input_tokens"]
            for run in made[:2]
            for event in traces[run["run_id"]]
            if event["type"] == "model_call"
        )
        assert _sum(samples, "blockyard_model_cost_usd_total") == pytest.approx(total.cost_usd)
        assert _sum(samples, "blockyard_model_calls_unpriced_total") == 0
        steps = sum(
            1
            for events in traces.values()
            for event in events
            if event["type"] in ("step_finished", "step_failed")
        )
        assert _sum(samples, "blockyard_step_duration_seconds_count") == steps
        assert (
            _sum(samples, "blockyard_step_duration_seconds_count", flow="fragile", step="boom") == 1
        )
        # bounded labels: never a run id
        assert not any("run_id" in dict(labels) for _name, labels in samples)

        decided = client.post(f"/runs/{gated['run_id']}/resume", json={"decision": "approve"})
        assert decided.json()["status"] == "finished"
        after = _samples(client.get("/metrics").text)
        assert _sum(after, "blockyard_runs_resumed_total", flow="gated") == 1
        # a resume starts no new run
        assert _sum(after, "blockyard_runs_started_total", flow="gated") == 1
        assert _sum(after, "blockyard_runs_finished_total", flow="gated") == 1
        assert _sum(after, "blockyard_runs_waiting", flow="gated") == 0


HELD = {
    "blockyard.yaml": "server:\n  max_concurrent_runs: 1\n",
    "blocks/adder.yaml": ADDER,
    "blocks/nap.yaml": "block: nap\nversion: 1\nkind: wait\nduration: 30s\n",
    "flows/long.yaml": "flow: long\nversion: 1\nsteps:\n  - {id: nap, uses: nap}\n",
    "flows/add.yaml": "flow: add\nversion: 1\ninputs: {a: {type: integer}}\noutputs: [total]\nsteps:\n"
    '  - {id: sum, uses: adder, with: {x: "{{ inputs.a }}", y: 1}}\n',
}


def test_a_queued_run_of_a_dead_server_is_counted_as_taken_over(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard(HELD)
    first = serve(root, watch=False, schedules=False, grace=0.1)
    with first.client() as a:
        busy = a.post("/flows/long/runs?wait=false", json={})  # takes the first server's only slot
        wait_for(lambda: a.get(f"/runs/{busy.json()['run_id']}").json()["status"] == "running")
        accepted = a.post("/flows/add/runs?wait=false", json={"inputs": {"a": 2}})
        assert accepted.status_code == 202, accepted.text
    run_id = accepted.json()["run_id"]
    with state_db(
        root
    ) as conn:  # what kill -9 of its server leaves behind: a queued run held by a process gone
        conn.execute("UPDATE runs SET owner_start = ? WHERE id = ?", ("0", run_id))
    second = serve(root, watch=False, schedules=False)  # adopts it as it starts
    with second.client() as b:
        wait_for(lambda: b.get(f"/runs/{run_id}").json()["status"] == "finished")
        samples = _samples(b.get("/metrics").text)
    assert _sum(samples, "blockyard_runs_taken_over_total", kind="queued") == 1
    assert _sum(samples, "blockyard_runs_finished_total", flow="add") == 1
    with first.client() as a:
        assert (
            _sum(_samples(a.get("/metrics").text), "blockyard_runs_finished_total", flow="add") == 0
        )
