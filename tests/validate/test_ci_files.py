"""The files that run validation outside a terminal: the pre-commit hook, GitHub Actions, .ci/run."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hook() -> dict[str, object]:
    (only,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    found: dict[str, object] = only
    return found


def test_hook_runs_validate_on_the_changed_files(hook: dict[str, object]) -> None:
    assert hook["id"] == "blockyard-validate"
    assert hook["entry"] == "blockyard validate"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True


@pytest.mark.parametrize(
    ("path", "checked"),
    [
        ("flows/hello.yaml", True),
        ("blocks/greet.yml", True),
        ("blockyard.yaml", True),
        ("examples/yard/flows/a/b.yaml", True),
        ("examples/yard/blockyard.yaml", True),
        ("flows/hello.test.yaml", False),
        ("docs/flows.yaml", False),
        ("flows/notes.md", False),
        ("myblocks/x.yaml", False),
        (".github/workflows/ci.yml", False),
    ],
)
def test_hook_file_patterns(hook: dict[str, object], path: str, checked: bool) -> None:
    # pre-commit applies `files` and `exclude` with re.search
    selected = (
        re.search(str(hook["files"]), path) is not None
        and re.search(str(hook["exclude"]), path) is None
    )
    assert selected is checked


def test_the_workflows_run_the_ci_scripts() -> None:
    """GitHub runs what CI runs anywhere: .ci/run on the lock, .ci/latest weekly on the newest versions."""
    for name, script in (
        ("ci.yml", "bash .ci/run"),
        ("drift.yml", "bash .ci/latest 2>&1 | tee drift.log"),
    ):
        workflow = yaml.safe_load(
            (REPO / ".github" / "workflows" / name).read_text(encoding="utf-8")
        )
        (job,) = workflow["jobs"].values()
        uses = [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]
        runs = [step for step in job["steps"] if "run" in step]
        assert uses[:2] == ["actions/checkout", "actions/setup-python"], name
        assert job["steps"][1]["with"]["python-version"] == "3.11"
        assert [step["run"] for step in runs] == [script], name
        assert runs[0]["env"]["CI"] == "true" and job["timeout-minutes"] <= 90
    drift = yaml.safe_load(
        (REPO / ".github" / "workflows" / "drift.yml").read_text(encoding="utf-8")
    )
    triggers = drift[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"schedule", "workflow_dispatch"} and len(triggers["schedule"]) == 1
    (step,) = [step for step in next(iter(drift["jobs"].values()))["steps"] if "run" in step]
    assert step["shell"] == "bash", (
        "GitHub adds -o pipefail only for an explicit shell: tee would hide a failure"
    )


def test_ci_script_is_strict_and_ends_with_the_readme_test_command() -> None:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in script
    assert "bash .ci/setup --system" in script  # the lock (tests/test_lock.py)
    assert script.rstrip().splitlines()[-1] == "bash .ci/test"
    # the README's test command: the suite on SQLite and on Postgres (test_the_test_script_... below)
    test = (REPO / ".ci" / "test").read_text(encoding="utf-8")
    assert "set -euo pipefail" in test
    assert "```sh\nbash .ci/test\n```" in (REPO / "README.md").read_text(encoding="utf-8")
    for name in ("run", "test", "setup", "uv", "latest", "stress"):
        syntax = subprocess.run(
            ["bash", "-n", str(REPO / ".ci" / name)], capture_output=True, text=True
        )
        assert syntax.returncode == 0, syntax.stderr


FAKE_PYTHON = """#!/bin/sh
pass="${BLOCKYARD_TEST_DATABASE:-sqlite}"
echo "$pass pass: python $*"
if [ "$pass" = "$FAIL" ]; then exit 3; fi
"""


@pytest.mark.parametrize("fail", ["", "sqlite", "postgres"])
def test_the_test_script_runs_both_passes_and_fails_when_either_does(
    tmp_path: Path, fail: str
) -> None:
    """.ci/test runs `python -m pytest` on SQLite and on Postgres side by side, on three and two workers,
    printing each pass's slowest tests, and with the arguments it is given (a later -n wins), prints the
    Postgres pass's output after the SQLite pass's, and fails when either pass does."""
    # the active environment's python, put first on PATH by .ci/test
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(FAKE_PYTHON, encoding="utf-8")
    python.chmod(0o755)
    env = {**os.environ, "VIRTUAL_ENV": str(tmp_path), "FAIL": fail}
    env.pop("BLOCKYARD_TEST_DATABASE", None)
    run = subprocess.run(
        ["bash", str(REPO / ".ci" / "test"), "-x", "-k", "a b"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = run.stdout.splitlines()
    assert lines == [
        "== test: SQLite (the Postgres pass runs beside it; its output follows)",
        "sqlite pass: python -m pytest -n 3 --durations=15 --durations-min=5 -x -k a b",
        "== test: Postgres",
        "postgres pass: python -m pytest -n 2 --durations=15 --durations-min=5 -x -k a b",
    ], run.stdout + run.stderr
    assert run.returncode == (1 if fail else 0), run.stdout + run.stderr
    if fail:
        exits = {"sqlite": (3, 0), "postgres": (0, 3)}[fail]
        assert f"SQLite pass exit {exits[0]}, Postgres pass exit {exits[1]}" in run.stderr


def test_the_action_validates_tests_and_summarises_the_diff() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    assert {"yard", "base"} <= set(action["inputs"])
    steps = action["runs"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert any(run.startswith("blockyard validate --format github") for run in runs)
    assert "blockyard test" in runs
    (diff,) = [run for run in runs if "blockyard diff" in run]
    # the Markdown is kept (the eval mode's one PR comment puts it first) and goes to the job summary
    assert '--format markdown > "$RUNNER_TEMP/blockyard-diff.md"' in diff
    assert 'cat "$RUNNER_TEMP/blockyard-diff.md" >> "$GITHUB_STEP_SUMMARY"' in diff
    # every step that runs a blockyard command runs it in the yard (the comment and verdict steps only
    # name blockyard's files)
    commands = [
        step
        for step in steps
        if re.search(r"(^|[\s;(])blockyard [a-z]", step.get("run", "").split("pip install")[0])
    ]
    assert len(commands) >= 3 and all(
        step.get("working-directory") == "${{ inputs.yard }}" for step in commands
    )
    for (
        step
    ) in steps:  # inputs reach the shell through the environment, never pasted into the script
        assert "${{" not in step.get("run", ""), step


def test_the_action_installs_the_complete_engine() -> None:
    """`blockyard test` runs flows: the runtime must come along, from the action's own copy (the default:
    `blockyard-core`, whose runtime is the `run` extra) and from PyPI (`blockyard==X.Y.Z`, the metapackage).
    tests/test_action.py runs the steps with the default inputs."""
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert action["inputs"]["version"]["default"] == ""
    (install,) = [
        step["run"] for step in action["runs"]["steps"] if "pip install" in step.get("run", "")
    ]
    commands = [line.strip() for line in install.splitlines() if "pip install" in line]
    assert commands == [
        'python -m pip install "$ACTION_PATH[run]"',
        'python -m pip install "blockyard==$BLOCKYARD_VERSION"',
    ]


def test_this_repository_runs_the_action_on_its_example_yard() -> None:
    workflow = yaml.safe_load(
        (REPO / ".github" / "workflows" / "yard.yml").read_text(encoding="utf-8")
    )
    (job,) = workflow["jobs"].values()
    checkout, action = job["steps"]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["fetch-depth"] == 0
    assert action["uses"] == "./" and action["with"] == {
        "yard": "."
    }  # the default: the action's own copy


def test_the_readme_names_refs_that_exist() -> None:
    """No release is tagged yet: the README's hook and Action name `main`, a ref every clone has."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "uses: blockyard/blockyard@main" in readme and "rev: main" in readme
    # a tag the README names must exist first (a release: docs/testing.md); until then, only main
    assert set(re.findall(r"(?:blockyard/blockyard@|rev: )([\w.-]+)", readme)) == {"main"}
