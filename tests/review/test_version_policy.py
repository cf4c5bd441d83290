"""The version policy: `blockyard validate --base REV` (and `diff`) report BY800-BY802 at file:line:col,
in every report format; without `--base` there is no such check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.review.yardgit import GREET, HELLO, SHOUT, commit, repo
from tests.support.cli import Cli, in_process


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(capsys)


def test_a_prompt_change_without_a_new_version_is_BY800_at_the_block(
    tmp_path: Path, cli: Cli
) -> None:
    root = repo(tmp_path / "yard")
    versioned = GREET.replace("kind: llm\n", "version: 1\nkind: llm\n")
    base = commit(root, "version written", {"blocks/greet.yaml": versioned})
    (root / "blocks/greet.yaml").write_text(
        GREET.replace("kind: llm\n", "version: 1\nkind: llm\n").replace(
            "Greet {{ name }}.", "Greet {{ name }} warmly."
        )
    )
    outcome = cli(root, "validate", "--base", base)
    assert outcome.code == 1
    assert outcome.out.splitlines() == [
        "blocks/greet.yaml:3:1: error BY800 block 'greet' changed its prompt (prompt.user changed) but kept version 1: "
        "bump `version:`"
    ]
    assert cli(root, "validate").code == 0  # off without --base
    (root / "blocks/greet.yaml").write_text(
        GREET.replace("kind: llm\n", "version: 2\nkind: llm\n").replace(
            "Greet {{ name }}.", "Greet {{ name }} warmly."
        )
    )
    assert cli(root, "validate", "--base", base).code == 0  # bumped


def test_a_flow_contract_change_without_a_new_version_is_BY801(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard")
    (root / "flows/hello.yaml").write_text(
        HELLO.replace("outputs: [greeting, loud]", "outputs: [loud]")
    )
    outcome = cli(root, "validate", "--base", "HEAD", "--format", "json")
    assert outcome.code == 1
    (problem,) = json.loads(outcome.out)
    assert (problem["file"], problem["line"], problem["col"], problem["code"]) == (
        "flows/hello.yaml",
        1,
        1,
        "BY801",
    )
    assert "outputs" in problem["message"]


def test_a_breaking_block_change_under_a_flow_not_updated_is_BY802_at_the_step(
    tmp_path: Path, cli: Cli
) -> None:
    root = repo(tmp_path / "yard")
    broken = SHOUT.replace("block: shout\n", "block: shout\nversion: 2\n").replace(
        "  text: {type: string}\n", "  words: {type: string}\n"
    )
    (root / "blocks/shout.yaml").write_text(broken.replace('"text | upper"', '"words | upper"'))
    for fmt in ("text", "github", "sarif"):
        outcome = cli(root, "validate", "--base", "HEAD", "--format", fmt)
        assert outcome.code == 1
        assert "BY802" in outcome.out, fmt
    outcome = cli(root, "validate", "--base", "HEAD", "--format", "json")
    found = {(p["file"], p["line"], p["col"], p["code"]) for p in json.loads(outcome.out)}
    # hello's step `shout` (line 11, `uses:` at col 5) binds the removed input
    assert ("flows/hello.yaml", 11, 5, "BY802") in found
    outcome = cli(root, "validate", "--base", "HEAD", "--format", "github")
    assert (
        "::error file=flows/hello.yaml,line=11,col=5,title=BY802::step 'shout' still runs block 'shout'"
        in outcome.out
    )
    # diff reports the same finding
    diff = cli(root, "diff", "HEAD", "--format", "json")
    assert "BY802" in {p["code"] for p in json.loads(diff.out)["problems"]}
    # once the flow is updated, the flow's own checks judge it: no BY802
    (root / "flows/hello.yaml").write_text(HELLO.replace("with: {text:", "with: {words:"))
    outcome = cli(root, "validate", "--base", "HEAD", "--format", "json")
    assert "BY802" not in {p["code"] for p in json.loads(outcome.out)}


def test_base_errors(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard")
    outcome = cli(root, "validate", "--base", "nope")
    assert (outcome.code, outcome.err.strip()) == (
        2,
        "error: 'nope' is neither a folder nor a git revision",
    )
