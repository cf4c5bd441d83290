"""POST /plans/runs with a plan that remembers (plans/order_lunch.json): the first run waits at its
gate, is resumed over HTTP with the person's values, and the second run goes straight through."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interchange.test_taskplan_memory import example_yard, lunch_plan
from tests.serve.serve_helpers import Live, wait_run


def test_a_plan_with_memory_asks_once_over_http(
    tmp_path: Path, serve: Callable[..., Live], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    live = serve(example_yard(tmp_path), watch=False, schedules=False)
    body = {"plan": lunch_plan(), "inputs": {"user_id": "ada"}}
    with live.client() as client:
        started = client.post("/plans/runs", params={"wait": "false"}, json=body)
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        paused = wait_run(client, run_id)
        assert (paused["status"], paused["flow"]) == ("waiting", "lunch_plan"), paused
        [gate] = paused["gates"]
        assert gate["step"] == "remember" and "No usual lunch saved for ada" in gate["message"]

        resumed = client.post(
            f"/runs/{run_id}/resume",
            json={"approve": True, "values": {"restaurant": "Chipotle", "dish": "burrito"}},
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "finished"
        assert resumed.json()["outputs"]["confirmation"] == "LUNCH-TUE-chipotle-7"

        again = client.post("/plans/runs", json=body)  # waits for the run by default
        assert again.status_code == 200, again.text
        assert again.json()["status"] == "finished", again.json()
        assert again.json()["outputs"]["preference"] == "has_preference"
        events = client.get(
            f"/runs/{again.json()['run_id']}/events", headers={"Accept": "application/json"}
        ).json()
        assert [e["step"] for e in events["events"] if e["type"] == "step_finished"] == [
            "recall",
            "check",
            "usual",
            "order",
            "announce",
        ]


def test_a_plan_without_its_memory_scope_is_refused_in_its_terms(
    tmp_path: Path, serve: Callable[..., Live], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    live = serve(example_yard(tmp_path), watch=False, schedules=False)
    plan = lunch_plan()
    del plan["memory"]
    with live.client() as client:
        answer = client.post("/plans/runs", json={"plan": plan, "inputs": {"user_id": "ada"}})
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "invalid_plan"
        assert {
            d["message"].split(":")[0] for d in error["diagnostics"] if d["code"] == "BY357"
        } == {"steps[0].block_id", "steps[3].block_id", "steps[5].block_id"}
