"""The GitHub Action (action.yml) with its default inputs, step by step, as a runner runs it.

A throw-away repository holds the example yard (the base commit, `origin/main`) and a pull request's
second commit that changes a flow. Each composite step's `run:` script goes to bash as GitHub runs it
(`bash --noprofile --norc -e -o pipefail`), in its working directory, with its `env:` — `${{ ... }}`
replaced by the inputs' defaults, the action's path, the base branch and the earlier steps' outputs
(read back from GITHUB_OUTPUT) — and GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files. Only `uses:` steps
(setup-python) are skipped: `python` is a fresh virtualenv whose dependencies are this environment's,
and pip installs the action's own copy from it without an index or build isolation, so the install
step really installs this checkout (the default `version: ""`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.review.yardgit import commit, git
from tests.support.example import copy_example_yard
from tests.support.venvs import clean_env, venv_on_this_environment

REPO = Path(__file__).resolve().parents[1]
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _expand(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        if match.group(1) not in context:
            raise AssertionError(f"action.yml uses ${{{{ {match.group(1)} }}}}, which this test does not provide")
        return context[match.group(1)]

    return EXPRESSION.sub(value, text)


def _outputs(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.mark.timeout(300)
def test_the_action_with_its_default_inputs_installs_its_copy_validates_tests_and_summarises(tmp_path: Path) -> None:
    action: dict[str, Any] = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    assert inputs["version"] == ""

    work = copy_example_yard(tmp_path / "work")
    git(work, "init", "-q", "-b", "main")
    commit(work, "the example yard")
    git(work, "update-ref", "refs/remotes/origin/main", "HEAD")  # what actions/checkout fetches of the base
    git(work, "checkout", "-q", "-b", "pull-request")
    hello = work / "flows" / "hello.yaml"
    hello.write_text(hello.read_text(encoding="utf-8").replace(
        "description: Greet someone, then shout the greeting.", "description: Greet someone, then shout it."),
        encoding="utf-8")
    commit(work, "a pull request")

    bin_dir = venv_on_this_environment(tmp_path / "python")
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    output.touch()
    summary.touch()
    action_path = str(REPO)
    env = clean_env(PATH=f"{bin_dir}:{clean_env()['PATH']}", GITHUB_ACTION_PATH=action_path,
                    GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary), GITHUB_BASE_REF="main",
                    GITHUB_WORKSPACE=str(work),
                    # offline: the dependencies are already there, and so is hatchling to build the copy.
                    # PIP_NO_BUILD_ISOLATION=0 is `--no-build-isolation` (pip reads a store-false flag so)
                    PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1")

    ran: dict[str, subprocess.CompletedProcess[str]] = {}
    for step in action["runs"]["steps"]:
        if "uses" in step:
            assert step["uses"].startswith("actions/setup-python@"), step
            continue
        context = {f"inputs.{name}": value for name, value in inputs.items()}
        context |= {"github.action_path": action_path, "github.base_ref": "main"}
        context |= {f"steps.{step_id}.outputs.{key}": value for step_id in ("base",)
                    for key, value in _outputs(output).items()}
        step_env = {name: _expand(str(value), context) for name, value in step.get("env", {}).items()}
        cwd = work / _expand(step.get("working-directory", "."), context)
        assert step["shell"] == "bash"
        done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]],
                              cwd=cwd, env={**env, **step_env}, capture_output=True, text=True, timeout=240)
        ran[step["name"]] = done
        assert done.returncode == 0, f"{step['name']}:\n{done.stdout}\n{done.stderr}"

    assert list(ran) == ["Install Blockyard", "Choose the base", "blockyard validate", "blockyard test",
                         "blockyard diff"]
    where = subprocess.run([str(bin_dir / "python"), "-c", "import engine; print(engine.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    assert Path(where.strip()).is_relative_to(tmp_path / "python"), "the install step installed the action's copy"
    assert _outputs(output)["rev"] == "origin/main"
    assert ran["blockyard validate"].stdout.startswith("::notice::blockyard validate: no problems in ")
    tests = ran["blockyard test"].stdout
    assert "PASS flows/hello.test.yaml: shouts the model's greeting" in tests
    assert re.search(r"^\d+ passed, 0 failed$", tests, re.MULTILINE), tests
    markdown = summary.read_text(encoding="utf-8")
    assert "hello" in markdown and "```mermaid" in markdown, markdown
    assert shutil.which("blockyard", path=str(bin_dir)) is not None
