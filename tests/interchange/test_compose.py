"""`blockyard compose "INTENT"`: a model drafts a TaskPlan from the catalog, repaired while the
validator finds problems (three rounds at most), written as flows/NAME.yaml or run with --run.
Offline, the mock drafts the plan itself (engine/models/mock_plans.py); scripted replies play a
model whose first plans are wrong."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.cli import main
from engine.definitions.project import load_project
from engine.interchange.compose import ComposeFailed, compose
from engine.models.providers.mock import MockGenerator
from engine.models.script import MockScript
from engine.models.structured import StructuredClient
from engine.spec import ModelProfile
from tests.serve.test_serve_plans import ANSWER, REFUND

REPO = Path(__file__).resolve().parents[2]
LUNCH = "order my lunch every Tuesday at 1pm"

WRONG = {
    "plan_id": "wrong",
    "user_intent": "answer me",
    "entry_step_id": "write",
    "steps": [
        {
            "step_id": "write",
            "block_id": "anwser",
            "input_mappings": {"text": "{{ inputs.message }}"},
        }
    ],
}
RIGHT = {
    "plan_id": "right",
    "user_intent": "answer me",
    "entry_step_id": "write",
    "steps": [
        {
            "step_id": "write",
            "block_id": "answer",
            "input_mappings": {"text": "{{ inputs.message }}"},
        }
    ],
}


def example_yard(tmp_path: Path) -> Path:
    root = tmp_path / "yard"
    for folder in ("blocks", "flows", "prompts"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "blockyard.yaml", root / "blockyard.yaml")
    return root


def small_yard(tmp_path: Path, replies: list[Any]) -> Path:
    """Two blocks and a `default` mock profile that answers compose requests with `replies`."""
    root = tmp_path / "small"
    (root / "blocks").mkdir(parents=True)
    (root / "flows").mkdir()
    config = {"models": {"default": {"provider": "mock", "replies": {"compose": replies}}}}
    (root / "blockyard.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (root / "blocks" / "answer.yaml").write_text(ANSWER, encoding="utf-8")
    (root / "blocks" / "refund.yaml").write_text(REFUND, encoding="utf-8")
    return root


def test_compose_writes_a_flow_of_the_example_yard_that_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = example_yard(tmp_path)
    assert main(["compose", LUNCH, "--root", str(root)]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert out == "wrote flows/order_my_lunch_every_tuesday.yaml\n"
    assert "round 1:" in err and "the plan validates" in err and "Traceback" not in err
    text = (root / "flows" / "order_my_lunch_every_tuesday.yaml").read_text(encoding="utf-8")
    flow = yaml.safe_load(text)
    assert flow["schedule"] == {"cron": "0 13 * * TUE", "timezone": "UTC"}
    uses = [step["uses"] for step in flow["steps"]]
    assert uses and all((root / "blocks" / f"{block}.yaml").exists() for block in uses)
    assert "place_order" in uses  # the lunch block the intent's words point at
    assert main(["validate", "--root", str(root)]) == 0, capsys.readouterr().err
    # deterministic: the same intent drafts the same flow
    assert main(["compose", LUNCH, "--name", "again", "--root", str(root)]) == 0
    again = yaml.safe_load((root / "flows" / "again.yaml").read_text(encoding="utf-8"))
    assert {**again, "flow": flow["flow"]} == flow


def test_compose_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = example_yard(tmp_path)
    target = root / "flows" / "hello.yaml"
    before = target.read_text(encoding="utf-8")
    assert main(["compose", "greet someone", "--name", "hello", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    # refused before asking
    assert err.startswith("error: flows/hello.yaml already exists") and "round" not in err
    assert target.read_text(encoding="utf-8") == before
    assert (
        main(["compose", "greet someone", "--name", "hello", "--force", "--root", str(root)]) == 0
    )
    assert yaml.safe_load(target.read_text(encoding="utf-8"))["steps"][0]["uses"] == "greet"


def test_compose_run_runs_the_plan_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = example_yard(tmp_path)
    before = sorted(p.name for p in (root / "flows").iterdir())
    code = main(
        ["compose", "greet someone", "--run", "-i", "intent=Ada", "--json", "--root", str(root)]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert events[-1]["data"]["outputs"]["greeting"] == "greet: name=Ada"
    assert sorted(p.name for p in (root / "flows").iterdir()) == before  # --run writes no flow


def test_the_model_repairs_its_plan_from_the_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the right plan is the answer only to a request that carries the first plan's diagnostic
    root = small_yard(
        tmp_path, [{"when": {"contains": "BY210 steps[0].block_id"}, "reply": RIGHT}, WRONG]
    )
    assert main(["compose", "answer me", "--root", str(root)]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "round 1: 1 problem in the plan; asking the model to repair it" in err
    assert "unknown block 'anwser'" in err and "round 2: the plan validates (answer)" in err
    flow = yaml.safe_load((root / "flows" / "answer_me.yaml").read_text(encoding="utf-8"))
    assert flow["steps"] == [
        {"id": "write", "uses": "answer", "with": {"text": "{{ inputs.message }}"}}
    ]


def test_a_repair_request_carries_the_plan_and_its_problems(tmp_path: Path) -> None:
    root = small_yard(tmp_path, [])
    script = MockScript({"compose": [WRONG, RIGHT]})
    model = StructuredClient(MockGenerator(ModelProfile(provider="mock"), run_script=script))
    composed = asyncio.run(compose(load_project(root), "answer me", model, name="answer_me"))
    assert [r.plan for r in composed.rounds] == [WRONG, RIGHT]
    first, second = script.calls
    assert "problems" not in first.inputs and [e["block"] for e in first.inputs["catalog"]] == [
        "answer",
        "query_memory",
        "refund",
        "save_to_memory",
    ]  # the built-in memory blocks too
    [problem] = second.inputs["problems"]
    assert problem.startswith("BY210 steps[0].block_id: ") and "unknown block 'anwser'" in problem
    assert second.inputs["previous_plan"] == WRONG
    assert isinstance(second, type(first)) and problem in str(getattr(second, "user", ""))


def test_three_wrong_plans_fail_with_the_problems_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = small_yard(tmp_path, [WRONG])
    assert main(["compose", "answer me", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert (
        err.count("asking the model to repair it") == 2
        and "round 3: 1 problem in the plan\n" in err
    )
    assert "error: the model's plan still has 1 problem after 3 rounds; nothing was written:" in err
    assert "error: BY210 steps[0].block_id: step 'write' uses unknown block 'anwser'" in err
    assert "Traceback" not in err and list((root / "flows").iterdir()) == []
    with pytest.raises(
        ComposeFailed, match="the model's plan still has 1 problem after 3 rounds"
    ) as failed:
        asyncio.run(
            compose(
                load_project(root),
                "answer me",
                StructuredClient(
                    MockGenerator(
                        ModelProfile(provider="mock"), run_script=MockScript({"compose": [WRONG]})
                    )
                ),
                name="x",
            )
        )
    assert len(failed.value.rounds) == 3


def test_a_plan_only_problem_is_repaired_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stray = {**RIGHT, "steps": [*RIGHT["steps"], {"step_id": "stray", "block_id": "answer"}]}
    root = small_yard(tmp_path, [{"when": {"contains": "BY852"}, "reply": RIGHT}, stray])
    assert main(["compose", "answer me", "--root", str(root)]) == 0
    assert "BY852 steps[1].step_id: nothing leads to step 'stray'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["compose", "x", "--name", "9 lives"],
            "error: --name '9 lives': a flow's name is letters",
        ),
        (
            ["compose", "x", "--model", "defualt"],
            "error: --model 'defualt': no such model profile in blockyard.yaml",
        ),
        (["compose", "x", "-i", "a=1"], "error: --input goes with --run"),
        (
            ["compose", "x", "--run", "--force"],
            "error: --force replaces a written flow; --run writes none",
        ),
        (["compose", "  "], "error: the intent is empty"),
    ],
)
def test_usage_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    root = small_yard(tmp_path, [RIGHT])
    assert main([*args, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(message)
        and "Traceback" not in err
        and list((root / "flows").iterdir()) == []
    )


def test_a_yard_without_blocks_has_nothing_to_compose_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "blockyard.yaml").write_text("{}\n", encoding="utf-8")
    assert main(["compose", "anything", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err.splitlines()[-1] == "error: the yard has no blocks to compose a flow from (in blocks/)"
    )
