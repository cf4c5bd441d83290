"""The GitHub Action (action.yml), step by step, as a runner runs it.

A throw-away repository holds the example yard (the base commit, `origin/main`) and a pull request's
second commit that changes a flow. Each composite step's `run:` script goes to bash as GitHub runs it
(`bash --noprofile --norc -e -o pipefail`), in its working directory, with its `env:` — `${{ ... }}`
replaced by the inputs, the action's path, the base branch, the pull request and the earlier steps'
outputs (read back from GITHUB_OUTPUT) — and GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files and RUNNER_TEMP;
a step's `if:` is judged as GitHub would (`always()`, `inputs.X == 'v'`). Only `uses:` steps
(setup-python, the cache) are skipped.

With its default inputs, `python` is a fresh virtualenv whose dependencies are this environment's, and
pip installs the action's own copy from it without an index or build isolation, so the install step
really installs this checkout (the default `version: ""`). The eval mode runs on this environment's
`blockyard` (the install step is the default test's), with a fake `gh` on PATH that plays GitHub's API:
the first push posts the pull request's comment, the second finds it by its marker and edits it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.review.yardgit import commit, git
from tests.support.example import copy_example_yard
from tests.support.venvs import clean_env, venv_on_this_environment

REPO = Path(__file__).resolve().parents[1]
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
ACTION: dict[str, Any] = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
SKIPPED_USES = ("actions/setup-python@", "actions/cache@")
MARKER = "<!-- blockyard-review -->"


def _expand(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        if match.group(1) not in context:
            raise AssertionError(
                f"action.yml uses ${{{{ {match.group(1)} }}}}, which this test does not provide"
            )
        return context[match.group(1)]

    return EXPRESSION.sub(value, text)


def _outputs(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _wanted(condition: str | None, inputs: dict[str, str]) -> bool:
    """A step's `if:` as GitHub judges the few forms action.yml uses: always(), inputs.X == 'v', joined by &&."""
    if condition is None:
        return True
    verdict = True
    for part in (piece.strip() for piece in condition.split("&&")):
        if part == "always()":
            continue
        match = re.fullmatch(r"inputs\.([\w-]+) == '([^']*)'", part)
        assert match is not None, f"action.yml has an `if:` this test cannot judge: {condition}"
        verdict = verdict and inputs[match.group(1)] == match.group(2)
    return verdict


def _pull_request(tmp_path: Path) -> Path:
    """The example yard on main (origin/main), and a pull request that changes hello's description."""
    work = copy_example_yard(tmp_path / "work")
    (work / ".gitignore").write_text(".blockyard/\n", encoding="utf-8")
    git(work, "init", "-q", "-b", "main")
    commit(work, "the example yard")
    # what actions/checkout fetches of the base
    git(work, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(work, "checkout", "-q", "-b", "pull-request")
    hello = work / "flows" / "hello.yaml"
    hello.write_text(
        hello.read_text(encoding="utf-8").replace(
            "description: Greet someone, then shout the greeting.",
            "description: Greet someone, then shout it.",
        ),
        encoding="utf-8",
    )
    commit(work, "a pull request")
    return work


def _run_steps(
    work: Path,
    inputs: dict[str, str],
    env: dict[str, str],
    output: Path,
    skip: tuple[str, ...] = (),
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run the action's steps in order as a runner would; a failed step ends the run (its result is in)."""
    ran: dict[str, subprocess.CompletedProcess[str]] = {}
    failed = False
    for step in ACTION["runs"]["steps"]:
        if "uses" in step:
            assert step["uses"].startswith(SKIPPED_USES), step
            continue
        condition = step.get("if")
        if (
            step["name"] in skip
            or not _wanted(condition, inputs)
            or (failed and "always()" not in str(condition))
        ):
            continue
        context = {f"inputs.{name}": value for name, value in inputs.items()}
        context |= {
            "github.action_path": str(REPO),
            "github.base_ref": "main",
            "github.repository": "acme/yard",
            "github.event.pull_request.number": env.get("PR_NUMBER_FOR_TEST", ""),
        }
        outputs = _outputs(output)
        context |= {
            f"steps.{step_id}.outputs.{key}": outputs.get(key, "")
            for step_id, keys in (("base", ("rev",)), ("evals", ("status",)))
            for key in keys
        }
        step_env = {
            name: _expand(str(value), context) for name, value in step.get("env", {}).items()
        }
        cwd = work / _expand(step.get("working-directory", "."), context)
        assert step["shell"] == "bash"
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]],
            cwd=cwd,
            env={**env, **step_env},
            capture_output=True,
            text=True,
            timeout=240,
        )
        ran[step["name"]] = done
        failed = failed or done.returncode != 0
    return ran


def _github_env(tmp_path: Path, work: Path, path: str) -> tuple[dict[str, str], Path, Path]:
    output, summary, temp = (
        tmp_path / "github_output",
        tmp_path / "step_summary",
        tmp_path / "runner_temp",
    )
    output.touch()
    summary.touch()
    temp.mkdir()
    env = clean_env(
        PATH=path,
        GITHUB_ACTION_PATH=str(REPO),
        GITHUB_OUTPUT=str(output),
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_BASE_REF="main",
        GITHUB_WORKSPACE=str(work),
        RUNNER_TEMP=str(temp),
    )
    return env, output, summary


@pytest.mark.cpu_heavy(
    "installs the action's copy of the project with pip, then validates, tests and summarises as a runner would"
)
@pytest.mark.timeout(300)
def test_the_action_with_its_default_inputs_installs_its_copy_validates_tests_and_summarises(
    tmp_path: Path,
) -> None:
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    assert (inputs["version"], inputs["evals"]) == ("", "false")
    work = _pull_request(tmp_path)
    bin_dir = venv_on_this_environment(tmp_path / "python")
    env, output, summary = _github_env(tmp_path, work, f"{bin_dir}:{clean_env()['PATH']}")
    # offline: the dependencies are already there, and so is hatchling to build the copy.
    # PIP_NO_BUILD_ISOLATION=0 is `--no-build-isolation` (pip reads a store-false flag so)
    env |= {
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }

    ran = _run_steps(work, inputs, env, output)
    for name, done in ran.items():
        assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"

    assert list(ran) == [
        "Install Blockyard",
        "Choose the base",
        "blockyard validate",
        "blockyard test",
        "blockyard diff",
    ]
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import engine; print(engine.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert Path(where.strip()).is_relative_to(tmp_path / "python"), (
        "the install step installed the action's copy"
    )
    assert _outputs(output)["rev"] == "origin/main"
    assert ran["blockyard validate"].stdout.startswith(
        "::notice::blockyard validate: no problems in "
    )
    tests = ran["blockyard test"].stdout
    assert "PASS flows/hello.test.yaml: shouts the model's greeting" in tests
    assert re.search(r"^\d+ passed, 0 failed$", tests, re.MULTILINE), tests
    markdown = summary.read_text(encoding="utf-8")
    assert "hello" in markdown and "```mermaid" in markdown, markdown
    assert shutil.which("blockyard", path=str(bin_dir)) is not None


FAKE_GH = r"""#!/usr/bin/env python3
# GitHub's API as `gh api` speaks it, for the comments of one pull request (tests/test_action.py)
import json, os, sys
state = os.environ["FAKE_GH_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "calls.jsonl"), "a") as log:
    log.write(json.dumps({"args": args, "token": os.environ.get("GH_TOKEN")}) + "\n")
assert args[0] == "api", args
comments = os.path.join(state, "comments.json")
known = json.load(open(comments)) if os.path.exists(comments) else [{"id": 7, "body": "Looks good to me!"}]
method = args[args.index("--method") + 1] if "--method" in args else "GET"
if method == "GET":
    query = args[args.index("--jq") + 1]
    assert query == '.[] | select(.body | startswith("<!-- blockyard-review -->")) | .id', query
    for comment in known:
        if comment["body"].startswith("<!-- blockyard-review -->"):
            print(comment["id"])
    sys.exit(0)
field = args[args.index("-F") + 1]
assert field.startswith("body=@"), field
body = open(field[len("body=@"):]).read()
path = next(arg for arg in args if arg.startswith("repos/"))
if method == "POST":
    assert path == "repos/acme/yard/issues/42/comments", path
    known.append({"id": 1000 + len(known), "body": body})
else:
    assert method == "PATCH" and path.startswith("repos/acme/yard/issues/comments/"), (method, path)
    number = int(path.rsplit("/", 1)[1])
    (comment,) = [comment for comment in known if comment["id"] == number]
    comment["body"] = body
json.dump(known, open(comments, "w"))
print("{}")
"""


@pytest.mark.cpu_heavy(
    "installs the action's copy of the project with pip, then validates, tests and summarises as a runner would"
)
@pytest.mark.timeout(600)
def test_the_eval_mode_posts_one_comment_and_edits_it_on_the_next_push(tmp_path: Path) -> None:
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs |= {"evals": "true", "github-token": "ghs_test_token"}
    work = _pull_request(tmp_path)
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    (fake_bin / "gh").write_text(
        f"#!{sys.executable}\n" + FAKE_GH.split("\n", 1)[1], encoding="utf-8"
    )
    (fake_bin / "gh").chmod(0o755)
    state = tmp_path / "gh-state"
    state.mkdir()
    path = f"{fake_bin}:{Path(sys.executable).parent}:{clean_env()['PATH']}"  # this environment's blockyard
    env, output, summary = _github_env(tmp_path, work, path)
    env |= {"FAKE_GH_STATE": str(state), "PR_NUMBER_FOR_TEST": "42"}

    first = _run_steps(work, inputs, env, output, skip=("Install Blockyard",))
    for name, done in first.items():
        assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"
    assert list(first) == [
        "Choose the base",
        "blockyard validate",
        "blockyard test",
        "blockyard diff",
        "blockyard eval",
        "Pull-request comment",
        "Eval verdict",
    ]
    assert first["Pull-request comment"].stdout == "posted the comment\n"
    comments = json.loads((state / "comments.json").read_text(encoding="utf-8"))
    assert [comment["id"] for comment in comments] == [7, 1001]
    body = comments[1]["body"]
    assert body.startswith(MARKER + "\n")
    diff_at, evals_at = body.index("```mermaid"), body.index("## Blockyard evals: `origin/main (")
    assert diff_at < evals_at  # the semantic diff, then the eval comparison
    # hello changed: run on both sides, the same
    assert "| hello | flow `hello` | 100% | 1.00 |" in body
    assert (
        "Not run, unchanged between the revisions: `shout` (block shout), `support_chat` (flow support_chat), "
        "`triage` (flow triage_ticket)." in body
    )
    markdown = summary.read_text(encoding="utf-8")
    assert "```mermaid" in markdown and "## Blockyard evals" in markdown  # the job summary has both
    calls = [
        json.loads(line)
        for line in (state / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert {call["token"] for call in calls} == {"ghs_test_token"}

    # the next push: the same comment, edited; the replies come from the cache the first run kept
    (work / "flows" / "hello.yaml").write_text(
        (work / "flows" / "hello.yaml")
        .read_text(encoding="utf-8")
        .replace("then shout it.", "then shout it out."),
        encoding="utf-8",
    )
    commit(work, "another push")
    second = _run_steps(work, inputs, env, output, skip=("Install Blockyard",))
    assert second["Pull-request comment"].stdout == "updated the comment 1001\n"
    comments = json.loads((state / "comments.json").read_text(encoding="utf-8"))
    assert [comment["id"] for comment in comments] == [7, 1001]
    assert comments[0]["body"] == "Looks good to me!"
    assert "cache: 10 of 10 model calls answered from the cache" in comments[1]["body"]
    assert second["Eval verdict"].returncode == 0


@pytest.mark.cpu_heavy(
    "installs the action's copy of the project with pip, then validates, tests and summarises as a runner would"
)
@pytest.mark.timeout(600)
def test_the_eval_mode_fails_the_job_after_commenting_when_an_eval_regresses(
    tmp_path: Path,
) -> None:
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs |= {"evals": "true"}
    work = _pull_request(tmp_path)
    # no flow test covers it: only the eval sees the change
    team = work / "blocks" / "assign_team.yaml"
    team.write_text(
        team.read_text(encoding="utf-8").replace("'P1' if urgency >= 8", "'P0' if urgency >= 8"),
        encoding="utf-8",
    )
    commit(work, "a new top priority")
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    (fake_bin / "gh").write_text(
        f"#!{sys.executable}\n" + FAKE_GH.split("\n", 1)[1], encoding="utf-8"
    )
    (fake_bin / "gh").chmod(0o755)
    state = tmp_path / "gh-state"
    state.mkdir()
    env, output, _ = _github_env(
        tmp_path, work, f"{fake_bin}:{Path(sys.executable).parent}:{clean_env()['PATH']}"
    )
    env |= {"FAKE_GH_STATE": str(state), "PR_NUMBER_FOR_TEST": "42"}
    ran = _run_steps(work, inputs, env, output, skip=("Install Blockyard",))
    assert ran["blockyard eval"].returncode == 0  # its exit 1 waits for the comment
    assert ran["Pull-request comment"].returncode == 0
    assert ran["Eval verdict"].returncode == 1
    assert ran["Eval verdict"].stdout == "blockyard eval failed (exit 1): see its table above\n"
    body = json.loads((state / "comments.json").read_text(encoding="utf-8"))[1]["body"]
    assert "| triage | flow `triage_ticket` | 100% → " in body and "⚠️ regression" in body
