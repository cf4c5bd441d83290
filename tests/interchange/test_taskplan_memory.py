"""A plan says what a flow file says about memory and schedules (`memory: {scope}`, `schedule.inputs`,
`schedule.misfire`), validated by the same rules and converted to the same flow: the lunch example as a
plan (plans/order_lunch.json) asks the first time and goes straight through once it remembers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.cli import main
from engine.definitions.project import load_project
from engine.interchange.compose import catalog
from engine.interchange.taskplan import check_plan, plan_flow, read_plan

REPO = Path(__file__).resolve().parents[2]
LUNCH_PLAN = REPO / "plans" / "order_lunch.json"


def example_yard(tmp_path: Path) -> Path:
    root = tmp_path / "yard"
    for folder in ("blocks", "flows", "prompts"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "blockyard.yaml", root / "blockyard.yaml")
    return root


def lunch_plan() -> dict[str, Any]:
    plan: dict[str, Any] = json.loads(LUNCH_PLAN.read_text(encoding="utf-8"))
    return plan


def write_plan(tmp_path: Path, plan: dict[str, Any]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan, indent=2), encoding="utf-8")
    return path


def events_of(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # the example yard's default profile: the offline mock
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_the_lunch_plan_asks_once_then_remembers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = example_yard(tmp_path)
    run = ["run", "--plan", str(LUNCH_PLAN), "-i", "user_id=ada", "--json", "--root", str(root)]
    assert main([*run, "--run-id", "first"]) == 3  # nothing remembered yet: the gate asks
    events = events_of(capsys.readouterr().out)
    assert events[-1]["type"] == "approval_required" and events[-1]["step"] == "remember"
    assert (
        main(
            [
                "resume",
                "first",
                "--approve",
                "--set",
                "restaurant=Chipotle",
                "--set",
                "dish=burrito",
                "--json",
                "--root",
                str(root),
            ]
        )
        == 0
    )
    done = events_of(capsys.readouterr().out)[-1]
    assert done["type"] == "run_finished"
    assert done["data"]["outputs"]["confirmation"] == "LUNCH-TUE-chipotle-7"

    assert main([*run, "--run-id", "second"]) == 0  # remembered: straight through, no gate
    events = events_of(capsys.readouterr().out)
    assert not [e for e in events if e["type"] == "approval_required"]
    finished = [e["step"] for e in events if e["type"] == "step_finished"]
    assert finished == ["recall", "check", "usual", "order", "announce"]
    outputs = events[-1]["data"]["outputs"]
    assert (outputs["preference"], outputs["confirmation"]) == (
        "has_preference",
        "LUNCH-TUE-chipotle-7",
    )
    # another user's scope remembers nothing
    assert main([*run, "-i", "user_id=grace", "--run-id", "third"]) == 3
    capsys.readouterr()


def test_import_writes_memory_and_schedule_inputs_into_the_flow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = example_yard(tmp_path)
    plan = lunch_plan()
    plan["schedule"]["misfire"] = "run_once"
    assert (
        main(["import", "taskplan", str(write_plan(tmp_path, plan)), "--root", str(root)]) == 0
    ), capsys.readouterr().err
    flow = yaml.safe_load((root / "flows" / "lunch_plan.yaml").read_text(encoding="utf-8"))
    assert flow["memory"] == {"scope": "users/{{ inputs.user_id }}"}
    assert flow["schedule"] == {
        "cron": "0 11 * * TUE",
        "timezone": "Europe/Paris",
        "inputs": {"user_id": "ada"},
        "misfire": "run_once",
    }
    assert main(["validate", "--root", str(root)]) == 0, capsys.readouterr().err


def test_the_flow_of_a_plan_has_the_memory_and_schedule_of_a_flow_file(tmp_path: Path) -> None:
    root = example_yard(tmp_path)
    flow = plan_flow(read_plan(LUNCH_PLAN.read_bytes(), "order_lunch.json"), load_project(root))
    assert flow["memory"] == {"scope": "users/{{ inputs.user_id }}"}
    assert flow["schedule"] == {
        "cron": "0 11 * * TUE",
        "timezone": "Europe/Paris",
        "inputs": {"user_id": "ada"},
    }
    steps = {step["id"]: step for step in flow["steps"]}
    assert steps["usual"]["branches"] == {"has_preference": "order", "no_preference": "remember"}
    assert steps["order"]["needs"] == ["remember"]  # and the branch has_preference leads there too


@pytest.mark.parametrize("path", sorted((REPO / "plans").glob("*.json")), ids=lambda p: p.name)
def test_the_example_plans_check_clean_against_the_example_yard(path: Path) -> None:
    _holding, _definition, problems = check_plan(
        read_plan(path.read_bytes(), path.name), load_project(REPO)
    )
    assert [d.format() for d in problems] == []


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if " error BY" in line]


def test_memory_and_schedule_rules_are_the_flows_and_placed_in_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = example_yard(tmp_path)
    plan = lunch_plan()
    del plan["memory"]
    del plan["schedule"]["inputs"]
    plan["schedule"]["misfire"] = "sometimes"
    path = write_plan(tmp_path, plan)
    assert main(["run", "--plan", str(path), "-i", "user_id=ada", "--root", str(root)]) == 1
    # the plan's schema first (BY850), as for a flow file
    [misfire] = _errors(capsys.readouterr().err)
    assert "BY850 schedule.misfire: " in misfire

    del plan["schedule"]["misfire"]
    path = write_plan(tmp_path, plan)
    assert main(["run", "--plan", str(path), "-i", "user_id=ada", "--root", str(root)]) == 1
    found = _errors(capsys.readouterr().err)
    text = path.read_text(encoding="utf-8").splitlines()
    by357 = [line for line in found if "BY357" in line]
    assert {line.split(" error BY357 ")[1].split(":")[0] for line in by357} == {
        "steps[0].block_id",
        "steps[3].block_id",
        "steps[5].block_id",
    }  # query_memory, save_to_memory, a prompt
    assert all(
        "has no memory: add memory: {scope:" in line or "add memory: {scope: ...}" in line
        for line in by357
    )
    [by509] = [line for line in found if "BY509" in line]
    assert (
        " error BY509 schedule: scheduled runs get no value for the required input 'user_id'"
        in by509
    )
    assert "set it in schedule.inputs" in by509
    row = int(by509.split(":")[1])
    assert text[row - 1].strip().startswith('"schedule"')

    plan = lunch_plan()
    plan["schedule"]["inputs"] = {"user_id": "ada", "usr": "x"}
    path = write_plan(tmp_path, plan)
    assert main(["run", "--plan", str(path), "-i", "user_id=ada", "--root", str(root)]) == 1
    [unknown] = _errors(capsys.readouterr().err)
    assert (
        "BY509 schedule.inputs.usr: schedule: 'usr' is not an input of flow 'lunch_plan'" in unknown
    )
    plan["memory"] = {"scope": "users/{{ inputs.nobody }}"}
    del plan["schedule"]["inputs"]["usr"]
    path = write_plan(tmp_path, plan)
    assert main(["run", "--plan", str(path), "-i", "user_id=ada", "--root", str(root)]) == 1
    [scope] = _errors(capsys.readouterr().err)
    assert " memory.scope: " in scope and "nobody" in scope


def test_compose_offers_the_memory_blocks(tmp_path: Path) -> None:
    root = tmp_path / "small"
    (root / "blocks").mkdir(parents=True)
    (root / "blockyard.yaml").write_text("{}\n", encoding="utf-8")
    shutil.copy(REPO / "blocks" / "announce_order.yaml", root / "blocks" / "announce_order.yaml")
    shutil.copy(REPO / "blocks" / "place_order.yaml", root / "blocks" / "place_order.yaml")
    entries = {entry["block"]: entry for entry in catalog(load_project(root))}
    assert sorted(entries) == [
        "announce_order",
        "place_order",
        "query_memory",
        "save_to_memory",
    ]  # built-ins too
    assert {name for name, entry in entries.items() if entry.get("needs_memory")} == {
        "announce_order",
        "query_memory",
        "save_to_memory",
    }  # its prompt reads user_history
