"""POST /plans/runs: a TaskPlan with a decision branch and an approval runs at once, pinned with the
run, and is resumed over HTTP like any run; a wrong plan is a 422 whose diagnostics point into it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.serve.serve_helpers import YARD, Live, wait_run

CLASSIFY = """
block: classify
description: Decide whether a message asks for a refund or for an answer.
kind: decide
inputs:
  text: {type: string}
outputs:
  verdict: {type: string, enum: [refund, reply]}
prompt:
  user: "Refund or reply? {{ text }}"
"""

REFUND = """
block: refund
description: Refund an amount.
kind: transform
inputs:
  amount: {type: integer}
outputs:
  refunded: {type: integer}
compute:
  refunded: "amount"
"""

ANSWER = """
block: answer
description: Answer in writing.
kind: transform
inputs:
  text: {type: string}
outputs:
  reply: {type: string}
compute:
  reply: "'About: ' ~ text"
"""

CONFIG = """
models:
  default:
    provider: mock
    replies:
      classify: [refund]
"""

PLAN: dict[str, Any] = {
    "plan_id": "refund_request",
    "user_intent": "Refund me if I was charged twice, otherwise answer me",
    "entry_step_id": "classify",
    "steps": [
        {
            "step_id": "classify",
            "block_id": "classify",
            "input_mappings": {"text": "{{ inputs.message }}"},
            "branches": {"refund": "pay", "reply": "write"},
        },
        {
            "step_id": "pay",
            "block_id": "refund",
            "depends_on": ["classify"],
            "input_mappings": {"amount": 12},
            "require_approval": {"message": "Refund 12 EUR?"},
        },
        {
            "step_id": "write",
            "block_id": "answer",
            "depends_on": ["classify"],
            "input_mappings": {"text": "{{ inputs.message }}"},
        },
    ],
}


@pytest.fixture
def plans_yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(
        {
            "blockyard.yaml": CONFIG,
            "blocks/classify.yaml": CLASSIFY,
            "blocks/refund.yaml": REFUND,
            "blocks/answer.yaml": ANSWER,
        }
    )


def test_a_plan_runs_at_once_waits_at_its_gate_and_is_resumed_over_http(
    plans_yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(plans_yard, watch=False, schedules=False)
    with live.client() as client:
        started = client.post(
            "/plans/runs",
            params={"wait": "false"},
            json={"plan": PLAN, "inputs": {"message": "I was charged twice"}},
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        paused = wait_run(client, run_id)
        assert paused["status"] == "waiting", paused
        assert paused["flow"] == "refund_request"
        [gate] = paused["gates"]
        assert (gate["step"], gate["message"]) == ("pay", "Refund 12 EUR?")
        # the plan's flow was pinned with the run: its graph is drawn from the stored definition
        assert {n["id"] for n in paused["graph"]["nodes"]} >= {"classify", "pay", "write"}

        result = client.post(f"/runs/{run_id}/resume", json={"approve": True})
        assert result.status_code == 200, result.text
        assert (result.json()["status"], result.json()["outputs"]) == (
            "finished",
            {"verdict": "refund", "refunded": 12},
        )
        events = client.get(f"/runs/{run_id}/events", headers={"Accept": "application/json"}).json()
        finished = [e["step"] for e in events["events"] if e["type"] == "step_finished"]
        assert finished == ["classify", "pay"]  # the branch not taken did not run


def test_a_plan_run_takes_the_durability_of_its_body(
    plans_yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(plans_yard, watch=False, schedules=False)
    with live.client() as client:
        refused = client.post(
            "/plans/runs",
            json={"plan": PLAN, "inputs": {"message": "charged twice"}, "durability": "none"},
        )
        assert refused.status_code == 422, refused.text  # its gate needs a checkpoint to wait at
        assert (
            "cannot run with durability none: step 'pay' is an approval gate"
            in refused.json()["error"]["message"]
        )
        started = client.post(
            "/plans/runs",
            params={"wait": "false"},
            json={"plan": PLAN, "inputs": {"message": "I was charged twice"}, "durability": "exit"},
        )
        assert started.status_code == 202, started.text
        assert started.json()["digest"]
        paused = wait_run(client, started.json()["run_id"])
        assert (paused["status"], paused["durability"]) == ("waiting", "exit")


def test_a_wrong_plan_is_refused_with_diagnostics_in_the_plan(
    plans_yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(plans_yard, watch=False, schedules=False)
    wrong = json.loads(json.dumps(PLAN))
    wrong["steps"][2]["block_id"] = "anwser"
    body = json.dumps({"plan": wrong, "inputs": {"message": "hi"}}, indent=2)
    with live.client() as client:
        answer = client.post(
            "/plans/runs", content=body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "invalid_plan"
        [diagnostic] = [d for d in error["diagnostics"] if d["severity"] == "error"]
        line = body.splitlines()[diagnostic["line"] - 1]
        assert '"block_id": "anwser"' in line
        assert diagnostic["message"].startswith("steps[2].block_id: ")
        assert "anwser" in diagnostic["message"]
        assert client.get("/runs").json()["runs"] == []


def test_a_flow_is_served_as_a_react_flow_graph(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve(make_yard(YARD), watch=False, schedules=False)
    with live.client() as client:
        graph = client.get("/flows/add", params={"format": "reactflow"}).json()
        assert graph["flow"]["flow"] == "add"
        assert [
            (n["id"], n["type"], n["data"]["block"], n["data"]["isStart"]) for n in graph["nodes"]
        ] == [("sum", "block", "adder", True)]
        assert client.get("/flows/add", params={"format": "svg"}).status_code == 422
