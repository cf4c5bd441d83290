"""`blockyard runs` and `runs show`: the table, filters, step summaries — and no LangGraph import."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from engine.runtime.events import Sequencer
from engine.runtime.listing import step_summary
from tests.runtime.conftest import Outcome, subprocess_env

Cli = Callable[..., Outcome]


def test_no_runs_yet(yard: Path, cli: Cli) -> None:
    assert cli(yard, "runs").out == "no runs yet\n"


def test_table_filters_and_show(yard: Path, cli: Cli) -> None:
    ok = cli(yard, "run", "calc", "--input", "n=1", "--run-id", "first-run")
    bad = cli(yard, "run", "fragile", "--run-id", "second-run")
    assert (ok.code, bad.code) == (0, 1)
    lines = cli(yard, "runs").out.splitlines()
    assert lines[0].split() == ["ID", "FLOW", "STATUS", "STARTED", "DURATION", "DETAIL"]
    assert [line.split()[:3] for line in lines[1:]] == [["second-run", "fragile@1", "failed"],
                                                       ["first-run", "calc@1", "finished"]]
    assert lines[1].endswith("step 'boom': tool 'explode' failed: RuntimeError: the fuse is lit")
    assert "first-run" not in cli(yard, "runs", "--status", "failed").out
    assert "second-run" not in cli(yard, "runs", "--flow", "calc").out
    assert cli(yard, "runs", "--flow", "nothing").out == "no runs match\n"
    assert len(cli(yard, "runs", "--limit", "1").out.splitlines()) == 2

    shown = cli(yard, "runs", "show", "first-run").out
    assert "status    finished" in shown
    assert "inputs\n  n: 1\n" in shown and "outputs\n  n: 2\n  label: small\n" in shown
    assert "  inc    finished" in shown and "  label  finished" in shown
    body = json.loads(cli(yard, "runs", "show", "first-run", "--json").out)
    assert body["run"]["outputs"] == {"n": 2, "label": "small"}
    assert body["definition"]["files"] == "same"
    assert [s["step"] for s in body["steps"]] == ["inc", "label"]
    assert cli(yard, "runs", "show", "frist-run").err.strip() == \
        "error: unknown run 'frist-run' (did you mean 'first-run'?)"


def test_listing_does_not_import_langgraph(yard: Path, cli: Cli) -> None:
    cli(yard, "run", "calc", "--input", "n=1", "--run-id", "r1")
    probe = ("import sys\nfrom engine.cli import main\n"
             f"main(['runs', '--root', {str(yard)!r}])\nmain(['runs', 'show', 'r1', '--root', {str(yard)!r}])\n"
             "print(sorted(m for m in sys.modules if m.startswith(('langgraph', 'langchain', 'openai'))))")
    done = subprocess.run([sys.executable, "-c", probe], env=subprocess_env(), capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_step_summary_counts_attempts_and_items() -> None:
    seq = Sequencer("r")
    events = [seq.make("step_started", "a"), seq.make("step_failed", "a", {"error": "boom", "duration_ms": 5}),
              seq.make("step_started", "a"), seq.make("step_finished", "a", {"duration_ms": 7}),
              seq.make("step_started", "m", {"index": 0}), seq.make("step_started", "m", {"index": 1}),
              seq.make("step_finished", "m", {"index": 1, "duration_ms": 1}), seq.make("step_started", "w")]
    summary = {s["step"]: s for s in step_summary(events, "interrupted")}
    assert (summary["a"]["status"], summary["a"]["attempts"], summary["a"]["duration_ms"]) == ("finished", 2, 12.0)
    assert (summary["m"]["status"], summary["m"]["attempts"]) == ("interrupted", 2)  # item 0 never ended
    assert summary["w"]["status"] == "interrupted"
    assert {s["step"]: s for s in step_summary(events, "running")}["w"]["status"] == "running"
