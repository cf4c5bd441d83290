"""`blockyard diff --state`: what a change means for a real paused run (mock model, real SQLite state),
a schedule and a conversation thread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.state.location import locate
from tests.review.yardgit import BASE, HELLO, commit, repo, write
from tests.support.cli import Cli, in_process

GATED = (
    HELLO
    + """\
  - id: confirm
    approval: {message: "Send it?", timeout: 1h, on_timeout: reject}
  - id: again
    uses: shout
    with: {text: "{{ context.loud }}"}
"""
)
CHAT = """\
flow: chat
inputs:
  message: {type: string}
outputs: [greeting]
schedule: {cron: "0 9 * * *", inputs: {message: morning}}
steps:
  - id: greet
    uses: greet
    with: {name: "{{ inputs.message }}"}
"""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(capsys)


def paused_run(cli: Cli, root: Path) -> str:
    outcome = cli(root, "run", "hello", "--json")
    assert outcome.code == 3, outcome.err
    (gate,) = [e for e in outcome.events() if e["type"] == "approval_required"]
    return str(gate["run_id"])


def in_flight(cli: Cli, root: Path) -> dict[str, Any]:
    outcome = cli(root, "diff", "HEAD", "--state", "--format", "json")
    assert outcome.code == 1, outcome.err
    found: dict[str, Any] = json.loads(outcome.out)["in_flight"]
    return found


def test_a_paused_run_whose_gate_is_removed_or_altered(tmp_path: Path, cli: Cli) -> None:
    root = repo(
        tmp_path / "yard", {**BASE, "flows/hello.yaml": GATED, ".gitignore": ".blockyard/\n"}
    )
    run_id = paused_run(cli, root)
    # altered: the gate asks something else
    write(root, {"flows/hello.yaml": GATED.replace("Send it?", "Really send it?")})
    found = in_flight(cli, root)
    (run,) = found["paused_runs"]
    assert (run["run"], run["flow"], run["step"], run["impact"]) == (
        run_id,
        "hello",
        "confirm",
        "altered",
    )
    assert "keeps running on its pinned version (v1)" in run["detail"]
    # the file, or the Postgres URL masked
    assert found["source"] == locate(root / ".blockyard" / "state.db").shown
    # removed: the run could not finish on the head
    write(
        root,
        {
            "flows/hello.yaml": GATED.replace(
                '  - id: confirm\n    approval: {message: "Send it?", timeout: 1h, '
                "on_timeout: reject}\n",
                "",
            )
        },
    )
    (run,) = in_flight(cli, root)["paused_runs"]
    assert (run["step"], run["impact"]) == ("confirm", "removed")
    assert "cannot finish if resumed after that definition is pruned" in run["detail"]
    text = cli(root, "diff", "HEAD", "--state")
    assert f"run {run_id} (hello, paused at confirm): step 'confirm' is removed" in text.out
    # a change elsewhere in the flow leaves the paused step alone: nothing to say about the run
    write(root, {"flows/hello.yaml": GATED.replace("default: World", "default: Moon")})
    assert in_flight(cli, root)["paused_runs"] == []


def test_schedules_and_threads(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard", {**BASE, "flows/chat.yaml": CHAT, ".gitignore": ".blockyard/\n"})
    outcome = cli(root, "run", "chat", "--input", "message=hi", "--thread", "t1")
    assert outcome.code == 0, outcome.err
    commit(root, "ran")
    write(root, {"flows/chat.yaml": CHAT.replace("0 9 * * *", "30 9 * * *")})
    found = in_flight(cli, root)
    (schedule,) = found["schedules"]
    assert schedule["flow"] == "chat"
    before, after = schedule["next_fire"]["base"], schedule["next_fire"]["head"]
    assert before.endswith("T09:00:00Z") and after.endswith("T09:30:00Z")
    (thread,) = found["threads"]
    assert (thread["thread"], thread["flow"]) == ("t1", "chat")
    assert "next turn runs the head's version" in thread["detail"]
