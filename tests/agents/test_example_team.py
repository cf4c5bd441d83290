"""The multi-agent example of the repository's yard runs from a copy of the repository with
`blockyard run` (in-process), offline: the coordinator's two sub-agents run in parallel, one writes a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.example import copy_example_yard

REPO = Path(__file__).resolve().parents[2]


def test_team_report_runs_from_a_fresh_copy(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_example_yard(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    done = cli(tmp_path, "run", "team_report", "--json")
    assert done.code == 0, done.err
    events = done.events()
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["data"]["outputs"]["report_path"] == "report.md"
    steps = [
        (e["type"], e["step"]) for e in events if e["type"] in ("step_started", "step_finished")
    ]
    # both sub-agents started before either finished: one turn of the coordinator, two in parallel
    assert steps[:3] == [
        ("step_started", "coordinate"),
        ("step_started", "research"),
        ("step_started", "write"),
    ]
    assert steps[-1] == ("step_finished", "coordinate")
    report = tmp_path / ".blockyard" / "workspaces" / events[0]["run_id"] / "report.md"
    assert report.read_text(encoding="utf-8").startswith("# Honeybees")
    written = [e["data"] for e in events if e["type"] == "tool_call" and e["step"] == "write"]
    assert [(d["tool"], d["status"]) for d in written] == [
        ("write_file", "started"),
        ("write_file", "ok"),
        ("final_answer", "ok"),
    ]
