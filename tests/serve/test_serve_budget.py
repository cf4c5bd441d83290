"""Budgets over HTTP (docs/observability.md, "Budgets"): a run that passes its budget is `failed` at its
step with the limit named, and `POST /runs/{id}/resume` with a raised `budget` continues it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.runtime.test_budgets import FILES, config, loopy
from tests.serve.serve_helpers import Live, wait_for

Yard = Callable[[dict[str, str]], Path]


def test_a_run_over_budget_fails_and_a_resume_with_a_raised_budget_finishes_it(
    make_yard: Yard, serve: Callable[..., Live]
) -> None:
    root = make_yard(
        {**FILES, "blockyard.yaml": config(), "flows/loopy.yaml": loopy("budget: {model_calls: 3}")}
    )
    live = serve(root)
    with live.client() as client:
        run = client.post("/flows/loopy/runs", json={}).json()
        assert (run["status"], run.get("step")) == ("failed", "dig"), run
        assert run["error"].startswith(
            "the run's budget is exceeded: model_calls: 3 model calls made, the limit is 3"
        )
        run_id = run["run_id"]

        bad = client.post(f"/runs/{run_id}/resume", json={"budget": {"model_calls": "many"}})
        assert bad.status_code == 422 and "budget model_calls" in bad.text, bad.text

        accepted = client.post(f"/runs/{run_id}/resume", json={"budget": {"model_calls": 30}})
        assert accepted.status_code in (200, 202), accepted.text
        wait_for(
            lambda: client.get(f"/runs/{run_id}").json()["status"] == "finished",
            timeout=30,
            interval=0.05,
        )
        done = client.get(f"/runs/{run_id}").json()
    assert done["outputs"] == {"answer": "found it"}
    assert done["budget"] == {"model_calls": 30}
