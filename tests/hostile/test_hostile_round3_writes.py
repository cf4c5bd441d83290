"""Hostile writes: a run writes only where the engine reads nothing, an import writes only its flow
file, and hostile arguments get a clear answer (never exit 4).

- A model's files must never become what the next run reads: an output folder (`blockyard run
  --output`, the HTTP body's `output_dir`, a flow's `output_dir`) that is, lies inside or contains
  the yard's definitions, code (`paths.code`), prompt folders or configuration is refused — exit 2,
  HTTP 422, BY435 at the flow file's line and column (engine/definitions/outputdir.py).
- `blockyard import reactflow|taskplan --name` is a flow's name, never a path: nothing is written
  outside the yard or in a subfolder (engine/interchange/files.py, `check_name`).
- A React Flow graph nested 100,000 deep, a 300-character `--name` and a 100,000-character `diff`
  revision are clear errors, not internal ones.

The command lines run through the hostile harness (a child process, a watchdog: hostile_harness.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.hostile.hostile_harness import child_env, run_cases
from tests.support import processes
from tests.support.cli import Cli
from tests.support.loopback import LOOPBACK

MARKER = "def mark() -> str:\n    return 'original'\n"
HOSTILE_CODE = "raise SystemExit('the model wrote this')\n"

# The yard's Python tool lives in its code folder `tools/` (paths.code); its agent's prompt in a prompt
# folder of its own (templates/); the mock model answers by writing tools/marker.py relative to the
# run's output folder, and a flow file, as a hostile model would.
YARD = {
    "blockyard.yaml": f"""
        paths: {{code: tools}}
        tools:
          mark: {{import: "marker:mark"}}
        models:
          coding:
            provider: mock
            replies:
              write:
                - $tool_calls:
                    - {{name: write_file, args: {{path: marker.py, content: {json.dumps(HOSTILE_CODE)}}}}}
                    - {{name: write_file, args: {{path: pwn.yaml, content: "flow: pwn\\nsteps: []\\n"}}}}
                - {{done: true}}
    """,
    "tools/marker.py": MARKER,
    "templates/coder.md": "Write {{ path }}\n",
    "blocks/coder.yaml": """
        block: coder
        kind: agent
        inputs: {path: {type: string}}
        outputs: {done: {type: boolean}}
        prompt: {user_file: templates/coder.md}
        tools: [write_file]
        model: coding
    """,
    "flows/code.yaml": """
        flow: code
        outputs: [done]
        steps:
          - {id: write, uses: coder, with: {path: marker.py}}
    """,
}

# folders a run must never write to, each with why (the yard above)
RESERVED_OUTPUTS = [
    "tools",
    "tools/sub",
    "./tools/",
    "Tools",
    "flows",
    "blocks",
    "blocks/x",
    "prompts",
    "templates",
    "templates/deeper",
    "schemas",
    "evals",
    ".blockyard",
    ".blockyard/workspaces",
    ".git/hooks",
    "blockyard.yaml",
    ".",
    "sneaky",
    "flows\\sub",
]


def _make(root: Path) -> Path:
    for name, text in YARD.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    # an innocent name, a link into flows/
    (root / "sneaky").symlink_to("flows", target_is_directory=True)
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the yard but the state folder's, with its content."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".blockyard" not in path.relative_to(root).parts
    }


def _outside(tmp_path: Path, root: Path) -> list[str]:
    """Files named evil* anywhere under tmp_path (outside the yard or in it)."""
    return sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("evil*"))


def _graph() -> dict[str, Any]:
    return {
        "nodes": [
            {
                "id": "a",
                "type": "agent",
                "data": {"label": "A", "system_prompt": "hi"},
                "position": {"x": 0, "y": 0},
            }
        ],
        "edges": [],
    }


def _plan() -> dict[str, Any]:
    return {
        "plan_id": "p1",
        "user_intent": "write",
        "entry_step_id": "s1",
        "steps": [{"step_id": "s1", "block_id": "coder", "input_mappings": {"path": "x.py"}}],
    }


def test_hostile_output_folders_names_and_arguments_on_the_command_line(tmp_path: Path) -> None:
    root = _make(tmp_path / "yard")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "G.json").write_text(json.dumps(_graph()), encoding="utf-8")
    (inputs / "P.json").write_text(json.dumps(_plan()), encoding="utf-8")
    (inputs / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="ascii")
    (inputs / "deep_nodes.json").write_text(
        '{"nodes": ' + "[" * 5_000 + "]" * 5_000 + ', "edges": []}', encoding="ascii"
    )
    graph, plan = str(inputs / "G.json"), str(inputs / "P.json")
    away = tmp_path / "away"
    away.mkdir()
    # (argv, the exit code it must get)
    expected: list[tuple[list[str], int]] = [
        (["run", "code", "--output", folder], 2) for folder in RESERVED_OUTPUTS
    ]
    expected += [
        (["import", "reactflow", graph, "--name", str(away / "evil")], 2),
        (["import", "reactflow", graph, "--name", "../../evil"], 2),
        (["import", "reactflow", graph, "--name", "a/b"], 2),
        (["import", "reactflow", graph, "--name", ".."], 2),
        (["import", "reactflow", graph, "--name", ".blockyard/x"], 2),
        (["import", "reactflow", graph, "--name", "flows/../../evil"], 2),
        (["import", "reactflow", graph, "--name", "evil\n"], 2),
        (["import", "reactflow", graph, "--name", "x" * 300], 2),
        (["import", "taskplan", plan, "--name", "../../evil2"], 2),
        (["import", "taskplan", plan, "--name", str(away / "evil3")], 2),
        (["import", "taskplan", plan, "--name", "y" * 300], 2),
        (
            ["import", "reactflow", str(inputs / "deep.json")],
            1,
        ),  # a wrong graph: exit 1 (docs/cli.md)
        (["import", "reactflow", str(inputs / "deep_nodes.json")], 1),
        (["diff", "r" * 100_000], 2),
        (["diff", ".", "r" * 100_000], 2),
        (["diff", "r" * 300, "."], 2),
    ]
    before = _snapshot(root)
    cases = [
        {"argv": argv, "cwd": str(root), "label": f"round3 #{n}"}
        for n, (argv, _code) in enumerate(expected)
    ]
    report = run_cases(cases, tmp_path)
    assert not report.failures(), report.summary()
    wrong = [
        f"{outcome.describe()} exit {outcome.rc}, expected {code}"
        for outcome, (_argv, code) in zip(report.outcomes, expected, strict=True)
        if outcome.rc != code
    ]
    assert not wrong, "\n".join(wrong)
    for outcome in report.outcomes[: len(RESERVED_OUTPUTS)]:
        assert (
            "a run writes only where the engine reads no definitions" in outcome.err
            or "it is the yard itself" in outcome.err
        ), outcome.describe()
    for outcome in report.outcomes[len(RESERVED_OUTPUTS) : len(RESERVED_OUTPUTS) + 11]:
        assert "--name '" in outcome.err and "name" in outcome.err, outcome.describe()
    assert _snapshot(root) == before  # nothing the engine reads was written, nothing new appeared
    assert _outside(tmp_path, root) == []
    assert (
        not (root / "flows" / "a").exists()
        and not (root / "flows" / "..").resolve().joinpath("evil.yaml").exists()
    )


def test_a_run_may_write_where_the_engine_reads_nothing(tmp_path: Path) -> None:
    root = _make(tmp_path / "yard")
    report = run_cases(
        [{"argv": ["run", "code", "--output", "output/tools"], "cwd": str(root), "label": "ok"}],
        tmp_path,
    )
    assert not report.failures(), report.summary()
    assert report.outcomes[0].rc == 0, report.outcomes[0].describe()
    assert (
        root / "output" / "tools" / "marker.py"
    ).read_text() == HOSTILE_CODE  # harmless here: nothing imports it
    assert (root / "tools" / "marker.py").read_text() == MARKER


@pytest.mark.parametrize(
    "folder",
    [
        "tools",
        "flows",
        "blocks",
        "prompts",
        "templates",
        ".",
        ".git",
        "schemas",
        "blockyard.yaml",
        "tools/x",
        "Flows/",
    ],
)
def test_a_flow_file_output_dir_over_what_the_engine_reads_is_by435(
    tmp_path: Path, folder: str, cli: Cli
) -> None:
    root = _make(tmp_path / "yard")
    (root / "flows" / "spill.yaml").write_text(
        f"flow: spill\noutputs: [done]\noutput_dir: {json.dumps(folder)}\nsteps:\n"
        "  - {id: write, uses: coder, with: {path: marker.py}}\n",
        encoding="utf-8",
    )
    checked = cli(root, "validate")
    assert checked.code == 1, checked.out + checked.err
    found = [line for line in (checked.out + checked.err).splitlines() if "BY435" in line]
    assert len(found) == 1, checked.out + checked.err
    assert found[0].startswith(
        f"flows{os.sep}spill.yaml:3:13: error BY435 output_dir '{folder}': "
    ), found
    assert folder == "." or "a run writes only where the engine reads no definitions" in found[0]


def test_hostile_output_folders_over_http_are_422(tmp_path: Path) -> None:
    """Against a real `blockyard serve` (a child without BLOCKYARD_* variables, like the hostile corpus's)."""
    root = _make(tmp_path / "yard")
    before = _snapshot(root)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log = (tmp_path / "serve.log").open("wb")
    proc = processes.Popen(
        [
            sys.executable,
            "-m",
            "engine",
            "serve",
            "--port",
            str(port),
            "--grace",
            "2",
            "--root",
            str(root),
        ],
        env=child_env(),
        cwd=str(root),
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1, verify=LOOPBACK).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (
                tmp_path / "serve.log"
            ).read_text()[-2000:]
            time.sleep(0.1)
        with httpx.Client(base_url=url, timeout=30, verify=LOOPBACK) as client:
            for folder in RESERVED_OUTPUTS:
                answer = client.post("/flows/code/runs", json={"output_dir": folder})
                assert answer.status_code == 422, (folder, answer.text)
                assert answer.json()["error"]["code"] == "invalid_request", answer.text
            plan = client.post("/plans/runs", json={"plan": _plan(), "output_dir": "tools"})
            assert plan.status_code == 422, plan.text
            assert "output_dir 'tools'" in plan.json()["error"]["message"]
            assert client.get("/runs").json()["runs"] == []
            fine = client.post("/flows/code/runs", json={"output_dir": "output"})
            assert fine.status_code == 200, fine.text
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    assert _snapshot(root) == {
        **before,
        "output/marker.py": HOSTILE_CODE.encode(),
        "output/pwn.yaml": b"flow: pwn\nsteps: []\n",
    }
