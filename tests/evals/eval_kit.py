"""Small yards with evals, for the tests of `blockyard eval` (docs/evals.md), and a loopback OpenAI-compatible
server that answers the greeting block by its prompt."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from tests.support import processes
from tests.support.cli import Outcome
from tests.support.openai_stub import RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "EVAL_STUB_KEY"
SECRET = (
    "sk-eval-test-secret-4242"  # the profile's API key: sent to the server, never kept in the cache
)

SUMMARIZE = """\
block: summarize
description: Sum a text up.
kind: llm
inputs:
  text: {type: string}
outputs:
  summary: {type: string}
prompt:
  user: "Summarize: {{ text }}"
"""

HELLO = """\
flow: hello
inputs:
  name: {type: string}
outputs: [greeting, loud]
steps:
  - id: greet
    uses: greet
    with: {name: "{{ inputs.name }}"}
  - id: shout
    uses: shout
    with: {text: "{{ context.greeting }}"}
"""

RECAP = """\
flow: recap
inputs:
  text: {type: string}
outputs: [summary]
steps:
  - id: summarize
    uses: summarize
    with: {text: "{{ inputs.text }}"}
"""

HELLO_EVAL = """\
eval: greetings
flow: hello
assert:
  - expr: "inputs.name in outputs.greeting"
    name: names the person
  - contains: HELLO
    output: loud
cases:
  - {name: ada, inputs: {name: Ada}}
  - {name: bo, inputs: {name: Bo}}
  - {name: cy, inputs: {name: Cy}}
"""

RECAP_EVAL = """\
eval: recaps
flow: recap
cases:
  - name: short
    inputs: {text: Bees dance.}
    assert: [{contains: bees, output: summary}]
"""


def config(base_url: str, *, judge: bool = False) -> str:
    """Every flow on the loopback server, priced ($1 and $2 per million input and output tokens)."""
    text = (
        f"models:\n  default:\n    provider: openai\n    name: stub-model\n    base_url: {base_url}\n"
        f"    api_key_env: {KEY_ENV}\n    pricing: {{input_per_mtok: 1.0, output_per_mtok: 2.0}}\n"
    )
    if judge:
        text += (
            f"  judge:\n    provider: openai\n    name: judge-model\n    base_url: {base_url}\n"
            f"    api_key_env: {KEY_ENV}\n    pricing: {{input_per_mtok: 3.0, output_per_mtok: 6.0}}\n"
        )
    return text


def user_text(request: RecordedRequest) -> str:
    return next(
        (str(m.get("content")) for m in reversed(request.messages) if m.get("role") == "user"), ""
    )


def greeter(request: RecordedRequest) -> Reply:
    """The greeting block's model. The first prompt (`Greet NAME.`) greets everyone by name; the new one
    (`Greet NAME warmly.`) costs more (12 and 6 tokens, not 10 and 5) and forgets Bo's name. The summary
    block's model sums up."""
    said = user_text(request)
    if said.startswith("Summarize:"):
        return Reply(structured={"summary": "bees dance to point at flowers"})
    warm = re.fullmatch(r"Greet (.+) warmly\.", said)
    name = warm.group(1) if warm else re.fullmatch(r"Greet (.+)\.", said).group(1)  # type: ignore[union-attr]
    greeting = (
        ("Hi there, friend!" if name == "Bo" else f"Hello dear {name}!")
        if warm
        else f"Hello {name}!"
    )
    return Reply(structured={"greeting": greeting}, usage=(12, 6, 0, 0) if warm else (10, 5, 0, 0))


def env(**extra: str) -> dict[str, str]:
    found = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", KEY_ENV: SECRET, **extra}
    found.pop("OPENAI_API_KEY", None)
    return found


def run_cli(root: Path, *args: str, timeout: float = 240, **extra: str) -> Outcome:
    """`blockyard ARGS` as a process of its own in `root` (the exit code is the point)."""
    done = processes.run(
        [sys.executable, "-m", "engine", *args],
        cwd=root,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)


def as_json(outcome: Outcome) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(outcome.out)
    return data
