"""Small yards in real git repositories, for `blockyard diff` and `validate --base`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}

GREET = """\
block: greet
description: Write a greeting.
kind: llm
inputs:
  name: {type: string}
outputs:
  greeting: {type: string}
prompt:
  system: You write short greetings.
  user: "Greet {{ name }}."
"""

SHOUT = """\
block: shout
description: Upper-case a text.
kind: transform
inputs:
  text: {type: string}
outputs:
  loud: {type: string}
compute:
  loud: "text | upper"
"""

HELLO = """\
flow: hello
description: Greet, then shout.
inputs:
  name: {type: string, default: World}
outputs: [greeting, loud]
steps:
  - id: greet
    uses: greet
    with: {name: "{{ inputs.name }}"}
  - id: shout
    uses: shout
    with: {text: "{{ context.greeting }}"}
"""

POLISH = """\
flow: polish
inputs:
  text: {type: string}
outputs: [loud]
steps:
  - id: polish
    loop:
      max_iterations: 3
      until: "context.loud | length > 3"
      steps:
        - id: shout
          uses: shout
          with: {text: "{{ inputs.text }}"}
  - id: pick
    router:
      value: "{{ context.loud }}"
      routes:
        - {contains: "A", goto: end}
      default: end
"""

CONFIG = "models:\n  default: {provider: mock}\n"

BASE = {
    "blockyard.yaml": CONFIG,
    "blocks/greet.yaml": GREET,
    "blocks/shout.yaml": SHOUT,
    "flows/hello.yaml": HELLO,
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def write(root: Path, files: Mapping[str, str | None]) -> None:
    """Write (or, for None, delete) files of the yard."""
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def repo(root: Path, files: Mapping[str, str | None] | None = None) -> Path:
    """A git repository on branch main whose first commit holds `files` (default: BASE)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, BASE if files is None else files)
    commit(root, "base")
    return root


def commit(root: Path, message: str, files: Mapping[str, str | None] | None = None) -> str:
    if files:
        write(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def changed_yard(root: Path) -> Path:
    """hello: a step removed, one added, one changed; a block whose prompt changed; a new flow."""
    repo(root)
    flow = HELLO.replace(
        'with: {text: "{{ context.greeting }}"}', 'with: {text: "<b>|{{ inputs.name }}|</b>"}'
    )
    flow = flow.replace(
        '  - id: greet\n    uses: greet\n    with: {name: "{{ inputs.name }}"}\n', ""
    )
    # order: no change
    flow = flow.replace("outputs: [greeting, loud]", "outputs: [loud, greeting]")
    flow += '  - id: default\n    uses: greet\n    with: {name: "{{ inputs.name }}"}\n'
    greet = BASE["blocks/greet.yaml"].replace("Greet {{ name }}.", "Say hi to {{ name }}.\\n```")
    solo = "flow: solo\nsteps:\n  - id: s\n    uses: shout\n    with: {text: hi}\n"
    commit(
        root,
        "change",
        {"flows/hello.yaml": flow, "blocks/greet.yaml": greet, "flows/solo.yaml": solo},
    )
    return root
