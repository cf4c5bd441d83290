"""Prompt files (`system_file`, `user_file`, `{% include %}`): checked by validate where the prompt
names them, confined to the yard, and pinned with a run's definition so that editing a prompt never
changes a run in progress. Real yards and state, the mock model recording what it was asked."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import Yard
from engine.models import StructuredRequest, scripted
from tests.runtime.conftest import Outcome

Cli = Callable[..., Outcome]
MakeYard = Callable[[dict[str, str]], Path]

MANAGER = """
    block: manager
    kind: llm
    inputs: {team: {type: string}, request: {type: string}}
    outputs: {plan: {type: string}}
    prompt:
      system_file: prompts/manager.md
      user: "{% include 'prompts/header.md' %}Request: {{ request }}"
"""
FLOW = """
    flow: plan
    inputs: {request: {type: string}}
    outputs: {plan: {optional: true}}
    steps:
      - {id: ok, approval: {message: "Plan {{ inputs.request }}?"}}
      - {id: manage, uses: manager, with: {team: crew}}
"""
FILES = {
    "blocks/manager.yaml": MANAGER,
    "flows/plan.yaml": FLOW,
    "prompts/manager.md": "You manage {{ team }}.\n{% include 'prompts/rules.md' %}",
    "prompts/rules.md": "Rule one: ship {{ request }}.",
    "prompts/header.md": "[v1] ",
}


def test_prompt_files_and_includes_are_rendered(make_yard: MakeYard) -> None:
    root = make_yard(FILES)
    with Yard.load(root) as yard:
        assert [d.format() for d in yard.diagnostics] == []
        with scripted("r1") as script:
            first = yard.run("plan", {"request": "a todo app"}, run_id="r1")
            assert first.status == "waiting"
            done = yard.resume("r1", approve=True)
    assert done.status == "finished", done.error
    (asked,) = script.calls
    assert isinstance(asked, StructuredRequest)
    assert asked.system == "You manage crew.\nRule one: ship a todo app."
    assert asked.user == "[v1] Request: a todo app"


def test_editing_a_prompt_never_changes_a_run_in_progress(make_yard: MakeYard) -> None:
    root = make_yard(FILES)
    with Yard.load(root) as yard:
        waiting = yard.run("plan", {"request": "a todo app"}, run_id="old")
        assert waiting.status == "waiting"
        record = yard.get_run("old")
        assert record is not None
        digest = record.digest
    (root / "prompts" / "rules.md").write_text("Rule one: EDITED {{ request }}.", encoding="utf-8")
    (root / "prompts" / "header.md").write_text("[v2] ", encoding="utf-8")
    with Yard.open(root) as yard:  # as another process would, after the edit
        with scripted("old") as old_script:
            resumed = yard.resume("old", approve=True)
        with scripted("new") as new_script:
            yard.run("plan", {"request": "a todo app"}, run_id="new")
            yard.resume("new", approve=True)
        new_record = yard.get_run("new")
        assert new_record is not None
        new_digest = new_record.digest
    assert resumed.status == "finished", resumed.error
    old_call, new_call = old_script.calls[0], new_script.calls[0]
    assert isinstance(old_call, StructuredRequest) and isinstance(new_call, StructuredRequest)
    assert (old_call.system, old_call.user) == (
        "You manage crew.\nRule one: ship a todo app.",
        "[v1] Request: a todo app",
    )
    assert (new_call.system, new_call.user) == (
        "You manage crew.\nRule one: EDITED a todo app.",
        "[v2] Request: a todo app",
    )
    assert new_digest != digest  # the prompt files' text is part of the pinned definition


def test_validate_checks_prompt_files_where_the_prompt_names_them(
    make_yard: MakeYard, cli: Cli, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("token", encoding="utf-8")
    block = """
        block: writer
        kind: llm
        inputs: {topic: {type: string}}
        outputs: {text: {type: string}}
        prompt:
          system: "Be brief."
          system_file: prompts/system.md
          user_file: prompts/user.md
    """
    other = """
        block: other
        kind: llm
        inputs: {topic: {type: string}}
        outputs: {text: {type: string}}
        prompt:
          system: "{% include 'prompts/missing.md' %}{% include '../secret.md' %}{% include topic %}"
          user: "{% include 'prompts/link.md' %}{% include 'prompts/loop.md' %}"
    """
    root = make_yard(
        {
            "blocks/writer.yaml": block,
            "blocks/other.yaml": other,
            "prompts/system.md": "System for {{ topic }}.",
            "prompts/user.md": "line one\n{{ subject }}\n{% include 'prompts/part.md' %}",
            "prompts/part.md": "{{ inputs.topic }}",
            "prompts/loop.md": "again {% include 'prompts/loop.md' %}",
        }
    )
    os.symlink(outside, root / "prompts" / "link.md")
    checked = cli(root, "validate")
    assert checked.code == 1
    assert checked.out.splitlines() == [
        "blocks/other.yaml:6:11: error BY430 block 'other': prompt.system: {% include %}: prompt file "
        "'../secret.md': it contains '..'; prompt files stay inside the yard",
        "blocks/other.yaml:6:11: error BY430 block 'other': prompt.system: {% include %}: prompt file "
        "'prompts/missing.md' does not exist",
        "blocks/other.yaml:6:11: error BY431 block 'other': prompt.system: {% include %} needs the file's name as a "
        "constant text, e.g. {% include 'prompts/rules.md' %}",
        "blocks/other.yaml:7:9: error BY430 block 'other': prompt.user: {% include %}: prompt file symbolic link "
        "prompts/link.md resolves outside the yard; it is not read",
        "blocks/other.yaml:7:9: error BY431 block 'other': prompt.user → prompts/loop.md: {% include "
        "'prompts/loop.md' %} includes itself (prompts/loop.md → prompts/loop.md)",
        "blocks/writer.yaml:7:3: error BY432 block 'writer': prompt.system and prompt.system_file are both given; "
        "keep one",
        "blocks/writer.yaml:8:14: error BY401 block 'writer': prompt.user_file prompts/user.md → prompts/part.md: "
        "a prompt sees the block's inputs by name (topic), not 'inputs': bind the value to an input in the step's "
        "`with:` and use the input's name",
        "blocks/writer.yaml:8:14: error BY401 block 'writer': prompt.user_file prompts/user.md: unknown variable "
        "'subject': a prompt sees the block's inputs (topic)",
    ]
    assert "token" not in checked.out + checked.err


def test_include_stays_refused_outside_prompts(make_yard: MakeYard, cli: Cli) -> None:
    flow = """
        flow: f
        steps:
          - {id: a, approval: {message: "{% include 'prompts/x.md' %}"}}
    """
    root = make_yard({"flows/f.yaml": flow, "prompts/x.md": "hello"})
    checked = cli(root, "validate")
    assert checked.code == 1
    assert checked.out.splitlines() == [
        "flows/f.yaml:3:33: error BY410 step 'a': {% include %} works only in a block's prompt (and the prompt "
        "files it includes); write the text in place"
    ]


@pytest.mark.parametrize("name", ["/etc/passwd", "prompts/../../x.md"])
def test_a_prompt_file_outside_the_yard_is_refused(
    make_yard: MakeYard, cli: Cli, name: str
) -> None:
    block = MANAGER.replace("system_file: prompts/manager.md", f"system_file: {name}")
    root = make_yard({**FILES, "blocks/manager.yaml": block})
    checked = cli(root, "validate")
    assert checked.code == 1
    (line,) = checked.out.splitlines()
    assert line.startswith(
        "blocks/manager.yaml:6:16: error BY430 block 'manager': prompt.system_file: prompt file"
    )
    assert cli(root, "run", "plan", "--input", "request=x").code == 1


def test_memory_variables_in_a_prompt_file_need_a_memory_scope(
    make_yard: MakeYard, cli: Cli
) -> None:
    block = """
        block: m
        kind: llm
        inputs: {x: {type: string}}
        outputs: {p: {type: string}}
        prompt:
          system_file: prompts/s.md
          user: "{{ x }}"
    """
    flow = """
        flow: f
        steps:
          - {id: a, uses: m, with: {x: hi}}
    """
    root = make_yard(
        {
            "blocks/m.yaml": block,
            "flows/f.yaml": flow,
            "prompts/s.md": "Likes: {{ user_preferences }}",
        }
    )
    checked = cli(root, "validate")
    assert checked.out.splitlines() == [
        "flows/f.yaml:3:19: error BY357 step 'a': the prompt of block 'm' reads 'user_preferences', but flow 'f' "
        "has no memory: add memory: {scope: ...} to the flow"
    ]
