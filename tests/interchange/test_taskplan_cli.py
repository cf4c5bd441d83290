"""`blockyard run --plan` and `blockyard import taskplan`: a plan runs at once or becomes a flow file,
validated like a flow, with every problem placed in the plan (file:line:col and `steps[N].key`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.cli import main
from tests.serve.test_serve_plans import ANSWER, CLASSIFY, CONFIG, PLAN, REFUND


def make_yard(tmp_path: Path) -> Path:
    root = tmp_path / "yard"
    (root / "blocks").mkdir(parents=True)
    (root / "flows").mkdir()
    (root / "blockyard.yaml").write_text(CONFIG, encoding="utf-8")
    for name, text in (("classify", CLASSIFY), ("refund", REFUND), ("answer", ANSWER)):
        (root / "blocks" / f"{name}.yaml").write_text(text, encoding="utf-8")
    return root


def write_plan(tmp_path: Path, plan: dict[str, Any]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan, indent=2), encoding="utf-8")
    return path


def test_run_plan_pauses_at_the_gate_of_the_branch_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(tmp_path)
    plan = write_plan(tmp_path, PLAN)
    code = main(
        ["run", "--plan", str(plan), "-i", "message=charged twice", "--json", "--root", str(root)]
    )
    out = capsys.readouterr().out
    assert code == 3, out  # paused for approval
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["type"] == "approval_required" and events[-1]["step"] == "pay"


def test_a_wrong_plan_is_reported_in_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(tmp_path)
    wrong = json.loads(json.dumps(PLAN))
    wrong["steps"][2]["block_id"] = "anwser"
    wrong["steps"].append({"step_id": "stray", "block_id": "answer"})
    plan = write_plan(tmp_path, wrong)
    assert main(["run", "--plan", str(plan), "--root", str(root)]) == 1
    err = capsys.readouterr().err
    text = plan.read_text(encoding="utf-8").splitlines()
    found = [line for line in err.splitlines() if line.startswith("plan.json:")]
    assert any("BY852 steps[3].step_id: nothing leads to step 'stray'" in line for line in found), (
        err
    )
    wrong["steps"].pop()
    plan = write_plan(tmp_path, wrong)
    assert main(["run", "--plan", str(plan), "--root", str(root)]) == 1
    [line] = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("plan.json:")
    ]
    row, col = (int(part) for part in line.split(":")[1:3])
    assert (
        text[row - 1].strip().startswith('"block_id": "anwser"') and "steps[2].block_id: " in line
    )
    assert col == text[row - 1].index('"anwser"') + 1


def test_import_taskplan_writes_a_flow_that_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(tmp_path)
    plan = write_plan(
        tmp_path,
        {
            **PLAN,
            "schedule": {
                "cron_expression": "0 13 * * TUE",
                "timezone": "Europe/Paris",
                "human_readable": "every Tuesday at 1pm",
            },
            "inputs": {"message": {"type": "string", "default": "my weekly refund"}},
        },
    )
    assert main(["import", "taskplan", str(plan), "--root", str(root)]) == 0, (
        capsys.readouterr().err
    )
    flow = yaml.safe_load((root / "flows" / "refund_request.yaml").read_text(encoding="utf-8"))
    assert flow["schedule"] == {"cron": "0 13 * * TUE", "timezone": "Europe/Paris"}
    assert flow["inputs"] == {"message": {"type": "string", "default": "my weekly refund"}}
    steps = {s["id"]: s for s in flow["steps"]}
    assert steps["classify"]["branches"] == {"refund": "pay", "reply": "write"}
    assert "needs" not in steps["pay"] and steps["pay"]["require_approval"] == {
        "message": "Refund 12 EUR?"
    }
    assert main(["validate", "--root", str(root)]) == 0
