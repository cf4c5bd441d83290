"""`blockyard diff`: a semantic diff between two revisions of a yard in a real git repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.review.yardgit import BASE, GREET, HELLO, POLISH, SHOUT, commit, git, repo, write
from tests.support.cli import Cli, in_process


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(capsys)


def diff_json(cli: Cli, root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    outcome = cli(root, "diff", *args, "--format", "json")
    assert outcome.code in (0, 1), outcome.err
    return outcome.code, json.loads(outcome.out)


def steps(found: dict[str, Any], flow: str) -> dict[str, dict[str, Any]]:
    (diff,) = [f for f in found["flows"] if f["name"] == flow]
    return {s["id"]: s for s in diff["steps"]}


def test_a_pure_reformat_is_no_difference(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard")
    base = git(root, "rev-parse", "HEAD")
    # comments, key order, flow vs block style, quoting, and defaults written out
    reformatted = """\
# the hello flow, reformatted
description: 'Greet, then shout.'
flow: hello
version: 1   # the default, written out
inputs:
  name:
    default: World
    type: string
outputs:
  - greeting
  - loud
steps:
  - uses: greet
    id: greet
    with:
      name: '{{ inputs.name }}'
  - {id: shout, uses: shout, with: {text: "{{ context.greeting }}"}, start: false}
"""
    head = commit(
        root,
        "reformat",
        {
            "flows/hello.yaml": reformatted,
            "blocks/shout.yaml": "# shout\n"
            + SHOUT.replace("kind: transform", "kind: 'transform'"),
        },
    )
    outcome = cli(root, "diff", base, head)
    assert outcome.code == 0, outcome.out + outcome.err
    assert "no differences" in outcome.out
    code, found = diff_json(cli, root, base, head)
    assert (code, found["changed"], found["flows"], found["blocks"]) == (0, False, [], [])


def test_steps_added_removed_changed_with_their_edges(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard")
    flow = HELLO.replace(
        'with: {text: "{{ context.greeting }}"}', 'with: {text: "{{ inputs.name }}!"}'
    )
    flow = flow.replace(
        '  - id: greet\n    uses: greet\n    with: {name: "{{ inputs.name }}"}\n', ""
    )
    flow = flow.replace("outputs: [greeting, loud]", "outputs: [loud]")
    flow += '  - id: again\n    uses: shout\n    with: {text: "{{ context.loud }}"}\n'
    commit(root, "steps", {"flows/hello.yaml": flow})
    code, found = diff_json(cli, root, "HEAD~1", "HEAD")
    assert code == 1
    changed = steps(found, "hello")
    assert changed["greet"]["status"] == "removed"
    assert changed["again"]["status"] == "added"
    assert changed["shout"]["status"] == "changed"
    assert changed["shout"]["details"] == [
        'with.text: "{{ context.greeting }}" → "{{ inputs.name }}!"'
    ]
    (hello,) = found["flows"]
    assert 'outputs: ["greeting", "loud"] → ["loud"]' in hello["settings"]
    assert "shout → again (next)" in hello["edges"]["added"]
    assert "start → greet (next)" in hello["edges"]["removed"]
    assert "greet → shout (next)" in hello["edges"]["removed"]


def test_loop_bounds_gates_routes_and_inputs(tmp_path: Path, cli: Cli) -> None:
    flow = POLISH
    root = repo(tmp_path / "yard", {**BASE, "flows/polish.yaml": flow})
    changed = flow.replace("max_iterations: 3", "max_iterations: 5").replace(
        'contains: "A"', 'contains: "B"'
    )
    mood = "  mood: {type: string, default: x}\n"
    changed = changed.replace("  text: {type: string}\n", "  text: {type: string}\n" + mood)
    gate = "          require_approval: {timeout: 1h, on_reject: fail}\n"
    changed = changed.replace("          uses: shout\n", "          uses: shout\n" + gate)
    commit(root, "bounds", {"flows/polish.yaml": changed})
    code, found = diff_json(cli, root, "HEAD~1", "HEAD")
    assert code == 1
    changed_steps = steps(found, "polish")
    assert changed_steps["polish"]["details"] == ["loop.max_iterations: 3 → 5"]
    assert changed_steps["shout"]["details"] == [
        'require_approval added: {"on_reject": "fail", "timeout": "1h"}'
    ]
    assert changed_steps["pick"]["details"] == [
        'router.routes: [{"contains": "A", "goto": "end"}] → [{"contains": "B", "goto": "end"}]'
    ]
    (polish,) = [f for f in found["flows"] if f["name"] == "polish"]
    assert 'inputs.mood added: {"type": "string", "default": "x"}' in polish["settings"]
    assert "pick → end (route: contains B)" in polish["edges"]["added"]
    assert "pick → end (route: contains A)" in polish["edges"]["removed"]
    assert "polish__check → shout (loop-back: again, bound 5)" in polish["edges"]["added"]


def test_block_contract_changes_are_judged_against_the_flows_using_it(
    tmp_path: Path, cli: Cli
) -> None:
    root = repo(tmp_path / "yard")
    # `text` is bound by hello's step: removing it breaks that step; a new output is compatible
    shout = (
        SHOUT.replace("  text: {type: string}\n", "  words: {type: string}\n")
        .replace("  loud: {type: string}\n", "  loud: {type: string}\n  count: {type: integer}\n")
        .replace('  loud: "text | upper"\n', '  loud: "words | upper"\n  count: "words | length"\n')
        .replace("block: shout\n", "block: shout\nversion: 2\n")
    )
    commit(root, "contract", {"blocks/shout.yaml": shout})
    code, found = diff_json(cli, root, "HEAD~1", "HEAD")
    assert code == 1
    (block,) = found["blocks"]
    assert (block["name"], block["status"], block["version"]) == (
        "shout",
        "changed",
        {"base": 1, "head": 2},
    )
    judged = {c["change"]: (c["breaking"], c["breaks"]) for c in block["contract"]}
    assert judged == {
        "input 'text' removed": (True, ["hello.shout"]),
        "input 'words' added, required": (True, ["hello.shout"]),
        "output 'count' added": (False, []),
    }
    assert block["breaking"] is True and block["used_by"] == ["hello"]
    (hello,) = found["flows"]
    assert (hello["status"], hello["through"]) == ("affected", ["block shout"])


def test_prompt_files_model_and_tools(tmp_path: Path, cli: Cli) -> None:
    greet = GREET.replace(
        "  system: You write short greetings.\n", "  system_file: prompts/system.md\n"
    )
    system = "You write short greetings.\n{% include 'prompts/tone.md' %}\n"
    root = repo(
        tmp_path / "yard",
        {
            **BASE,
            "blocks/greet.yaml": greet,
            "prompts/system.md": system,
            "prompts/tone.md": "Be warm.\n",
        },
    )
    commit(root, "tone", {"prompts/tone.md": "Be formal.\n"})  # only an included file changes
    code, found = diff_json(cli, root, "HEAD~1", "HEAD")
    assert code == 1
    (block,) = found["blocks"]
    assert block["prompt"] == ["prompt file prompts/tone.md changed"]
    assert "-Be warm." in block["prompt_diff"] and "+Be formal." in block["prompt_diff"]
    commit(
        root,
        "model",
        {
            "blocks/greet.yaml": greet.replace(
                "kind: llm\n", "kind: llm\nmodel: {provider: mock, temperature: 0.5}\n"
            )
        },
    )
    code, found = diff_json(cli, root, "HEAD~1", "HEAD")
    (block,) = found["blocks"]
    assert block["model"] == ['model added: {"provider": "mock", "temperature": 0.5}']


def test_renamed_flow_file_and_block(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard")
    commit(
        root,
        "rename",
        {
            "flows/hello.yaml": None,
            "flows/greeting.yaml": HELLO,
            "blocks/shout.yaml": None,
            "blocks/yell.yaml": SHOUT.replace("block: shout", "block: yell"),
        },
    )
    # the flow still names `shout`: that flow is updated below, so the rename is what the diff shows
    commit(root, "use yell", {"flows/greeting.yaml": HELLO.replace("uses: shout", "uses: yell")})
    code, found = diff_json(cli, root, "HEAD~2", "HEAD")
    assert code == 1
    (block,) = found["blocks"]
    assert (block["status"], block["old_name"], block["name"]) == ("renamed", "shout", "yell")
    (flow,) = found["flows"]
    assert (flow["status"], flow["old_file"], flow["file"]) == (
        "renamed",
        "flows/hello.yaml",
        "flows/greeting.yaml",
    )
    assert steps(found, "hello")["shout"]["details"] == ['uses: "shout" → "yell"']


def test_added_and_removed_definitions(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard")
    solo = "flow: solo\nsteps:\n  - id: s\n    uses: shout\n    with: {text: hi}\n"
    commit(
        root, "swap", {"flows/hello.yaml": None, "flows/solo.yaml": solo, "blocks/greet.yaml": None}
    )
    code, found = diff_json(cli, root, "HEAD~1", "HEAD")
    assert code == 1
    assert {(f["name"], f["status"]) for f in found["flows"]} == {
        ("hello", "removed"),
        ("solo", "added"),
    }
    assert [(b["name"], b["status"]) for b in found["blocks"]] == [("greet", "removed")]


def test_a_flow_version_bump_from_the_default_is_a_change_of_version(
    tmp_path: Path, cli: Cli
) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write(
        old,
        {**BASE, "flows/hello.yaml": HELLO.replace("flow: hello\n", "flow: hello\nversion: 1\n")},
    )
    write(
        new,
        {**BASE, "flows/hello.yaml": HELLO.replace("flow: hello\n", "flow: hello\nversion: 2\n")},
    )
    code, found = diff_json(cli, new, str(old), str(new))
    assert code == 1
    (hello,) = [f for f in found["flows"] if f["name"] == "hello"]
    assert hello["settings"] == ["version: 1 → 2"]
    text = cli(new, "diff", str(old), str(new)).out
    assert "version: 1 → 2" in text and "version added" not in text
    back = cli(new, "diff", str(new), str(old)).out  # and down again: not "version removed"
    assert "version: 2 → 1" in back and "version removed" not in back


def test_folders_as_the_two_sides(tmp_path: Path, cli: Cli) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write(old, BASE)
    write(new, {**BASE, "flows/hello.yaml": HELLO.replace("default: World", "default: Moon")})
    outcome = cli(new, "diff", str(old), str(new))
    assert outcome.code == 1
    assert 'inputs.name.default: "World" → "Moon"' in outcome.out


def test_default_base_is_the_merge_base_and_the_work_tree_stays_untouched(
    tmp_path: Path, cli: Cli
) -> None:
    root = repo(tmp_path / "yard")
    git(root, "checkout", "-q", "-b", "feature")
    commit(root, "feature", {"flows/hello.yaml": HELLO.replace("default: World", "default: Moon")})
    git(root, "checkout", "-q", "main")
    commit(root, "main moves on", {"blocks/greet.yaml": GREET.replace("short", "brief")})
    git(root, "checkout", "-q", "feature")
    write(root, {"blocks/shout.yaml": SHOUT.replace("Upper-case", "Shout")})  # not committed
    status = git(root, "status", "--porcelain")
    code, found = diff_json(cli, root)
    assert code == 1
    assert found["base"].startswith("merge-base with main (") and found["head"] == "working tree"
    # the feature's commit and the uncommitted edit, not what main did since the branch point
    assert [f["name"] for f in found["flows"] if f["status"] == "changed"] == ["hello"]
    assert [b["name"] for b in found["blocks"]] == ["shout"]
    assert git(root, "status", "--porcelain") == status
    assert git(root, "stash", "list") == ""


def test_errors_exit_2(tmp_path: Path, cli: Cli) -> None:
    root = repo(tmp_path / "yard")
    outcome = cli(root, "diff", "no-such-rev")
    assert (outcome.code, outcome.err.strip()) == (
        2,
        "error: 'no-such-rev' is neither a folder nor a git revision",
    )
    plain = tmp_path / "plain"
    write(plain, BASE)
    outcome = cli(plain, "diff")
    assert outcome.code == 2 and "not in a git repository" in outcome.err
    assert "Traceback" not in outcome.err
