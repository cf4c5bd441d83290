"""A tool that fails inside an agent — a Python tool, a built-in, a delegated flow — goes back to the
model as an error it can recover from, and stays visible: in its `tool_call` event, in the agent
step's record and in `blockyard runs show` (text and --json), even when the run finishes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from engine.cli import main
from tests.agents.agent_kit import run_flow

Yard = Callable[[dict[str, str]], Path]

CALLS = (
    "[{$tool_calls: [{name: explode, args: {reason: disk on fire}}, {name: read_file, args: {path: gone.txt}},"
    " {name: halves, args: {n: 1}}]}, recovered]"
)
FILES = {
    "blockyard.yaml": f'paths: {{code: tools}}\ntools:\n  explode: {{import: "faulty_tools:explode"}}\n'
    f"models:\n  default:\n    provider: mock\n    replies: {{lead: {CALLS}}}\n",
    "tools/faulty_tools.py": 'def explode(reason: str) -> str:\n    """Always fails."""\n'
    "    raise ValueError(reason)\n",
    "blocks/boss.yaml": """
        block: boss
        kind: agent
        description: Tries things.
        inputs: {task: {type: string}}
        outputs: {answer: {type: string}}
        prompt: {user: "{{ task }}"}
        tools: [explode, read_file]
    """,
    "blocks/half.yaml": """
        block: half
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {h: {type: integer}}
        compute: {h: "n // (n - 1)"}
    """,
    "flows/halves.yaml": "flow: halves\ndescription: Halves.\ninputs: {n: {type: integer}}\noutputs: [h]\n"
    "steps:\n  - {id: halve, uses: half}\n",
    "flows/one.yaml": "flow: one\noutputs: [answer]\nsteps:\n"
    "  - {id: lead, uses: boss, with: {task: t}, delegates: [halves]}\n",
}


def test_failed_tool_calls_reach_the_model_the_trace_and_runs_show(
    make_yard: Yard, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(FILES)
    done = run_flow(root, "one", env={})

    assert done.outputs == {"answer": "recovered"}  # the agent recovered: the run finishes
    seen = {m.name: str(m.content) for m in done.messages() if isinstance(m, ToolMessage)}
    assert seen["explode"] == "error: tool 'explode' failed: ValueError: disk on fire"
    assert seen["read_file"].startswith("error: ") and "gone.txt" in seen["read_file"]
    assert seen["halves"].startswith("error: flow 'halves' failed: ")
    errors = {e["tool"]: e["error"] for e in done.tool_calls("lead") if e["status"] == "error"}
    assert sorted(errors) == ["explode", "halves", "read_file"]
    record = done.of("step_finished", "lead")[0].data
    assert sorted(record["tool_errors"], key=lambda f: f["tool"]) == [
        {"tool": name, "error": errors[name]} for name in sorted(errors)
    ]

    assert main(["runs", "show", done.run_id, "--root", str(root)]) == 0
    text = capsys.readouterr().out
    step_line = next(line for line in text.splitlines() if line.startswith("  lead "))
    assert "finished" in step_line and step_line.endswith("3 tool calls failed")
    assert (
        "    tool explode failed: tool 'explode' failed: ValueError: disk on fire"
        in text.splitlines()
    )
    assert f"    tool halves failed: {errors['halves']}" in text.splitlines()
    assert f"    tool read_file failed: {errors['read_file']}" in text.splitlines()

    assert main(["runs", "show", done.run_id, "--root", str(root), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["run"]["status"] == "finished"
    lead = next(step for step in body["steps"] if step["step"] == "lead")
    assert sorted(lead["tool_errors"], key=lambda f: f["tool"]) == [
        {"tool": name, "error": errors[name]} for name in sorted(errors)
    ]
    assert (
        next(step for step in body["steps"] if step["step"] == "lead.halves")["status"] == "failed"
    )


def test_an_agent_that_gives_up_names_its_failed_tools_in_its_failure(
    make_yard: Yard, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = (
        "[{$tool_calls: [{name: explode, args: {reason: a}}, {name: explode, args: {reason: b}}]},"
        " {$tool_calls: [{name: explode, args: {reason: c}}, {name: explode, args: {reason: d}}]}]"
    )
    root = make_yard({**FILES, "blockyard.yaml": FILES["blockyard.yaml"].replace(CALLS, calls)})
    done = run_flow(root, "one", env={})

    assert done.error is not None and "gave up after 4 failed tool calls" in done.error
    failed = done.of("step_failed", "lead")[0].data
    assert sorted(f["error"] for f in failed["tool_errors"]) == [
        f"tool 'explode' failed: ValueError: {reason}" for reason in "abcd"
    ]

    assert main(["runs", "show", done.run_id, "--root", str(root)]) == 0
    text = capsys.readouterr().out
    assert "    tool explode failed: tool 'explode' failed: ValueError: d" in text.splitlines()
