"""A test yard with flows that finish, fail, time out, sleep and produce garbage, plus helpers to
run the CLI in real subprocesses (in-process: the `cli` fixture of tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import processes
from tests.support.cli import Outcome as Outcome  # re-exported: tests import it from here

REPO = Path(__file__).resolve().parents[2]

BLOCKS = {
    "blocks/greet.yaml": """
        block: greet
        kind: llm
        inputs: {name: {type: string}}
        outputs: {greeting: {type: string}}
        prompt: {user: "Greet {{ name }}."}
    """,
    "blocks/shout.yaml": """
        block: shout
        kind: transform
        inputs: {text: {type: string}}
        outputs: {loud: {type: string}, words: {type: integer}}
        compute: {loud: "text | upper", words: "text.split() | length"}
    """,
    "blocks/inc.yaml": """
        block: inc
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {n: {type: integer}}
        compute: {n: "n + 1"}
    """,
    "blocks/label.yaml": """
        block: label
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {label: {type: string}}
        compute: {label: "'big' if n > 10 else 'small'"}
    """,
    "blocks/copy.yaml": """
        block: copy
        kind: transform
        inputs: {zip: {type: string}}
        outputs: {same: {type: string}, length: {type: integer}}
        compute: {same: "zip", length: "zip | length"}
    """,
    "blocks/stamp.yaml": """
        block: stamp
        kind: transform
        outputs: {stamp: {type: string}}
        compute: {stamp: "'v1'"}
    """,
    "blocks/explode.yaml": """
        block: explode
        kind: tool
        tool: explode
        inputs: {text: {type: string}}
        outputs: {echo: {type: string}}
    """,
    "blocks/nap.yaml": """
        block: nap
        kind: wait
        duration: 1s
    """,
    "blocks/stuck.yaml": """
        block: stuck
        kind: wait
        duration: 30s
        timeout: 200ms
    """,
    "blocks/parse.yaml": """
        block: parse
        kind: llm
        model: scripted
        inputs: {text: {type: string}}
        outputs: {amount: {type: number}}
        prompt: {user: "Amount in {{ text }}?"}
    """,
}

FLOWS = {
    "flows/hello.yaml": """
        flow: hello
        inputs: {name: {type: string, default: World}}
        outputs: [greeting, loud, words]
        steps:
          - {id: greet, uses: greet, with: {name: "{{ inputs.name }}"}}
          - {id: shout, uses: shout, with: {text: "{{ context.greeting }}"}}
    """,
    "flows/calc.yaml": """
        flow: calc
        inputs: {n: {type: integer}}
        outputs: [n, label]
        steps:
          - {id: inc, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: label, uses: label}
    """,
    "flows/echo.yaml": """
        flow: echo
        inputs: {zip: {type: string}}
        outputs: [same, length]
        steps:
          - {id: copy, uses: copy, with: {zip: "{{ inputs.zip }}"}}
    """,
    "flows/fragile.yaml": """
        flow: fragile
        outputs: [stamp, echo]
        steps:
          - {id: stamp, uses: stamp}
          - {id: boom, uses: explode, with: {text: "{{ context.stamp }}"}}
    """,
    "flows/crashy.yaml": """
        flow: crashy
        inputs: {n: {type: integer, default: 1}}
        outputs: [n, label]
        steps:
          - {id: first, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: nap, uses: nap}
          - {id: last, uses: label}
    """,
    "flows/timeouty.yaml": """
        flow: timeouty
        steps:
          - {id: sleepy, uses: stuck}
    """,
    "flows/gated.yaml": """
        flow: gated
        inputs: {n: {type: integer, default: 1}}
        outputs: [n]
        steps:
          - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: ok, approval: {message: "Proceed with {{ context.n }}?"}}
          - {id: b, uses: inc}
    """,
    "flows/garbage.yaml": """
        flow: garbage
        outputs: [amount]
        steps:
          - {id: parse, uses: parse, with: {text: "ten dollars"}}
    """,
}

CONFIG = {
    "blockyard.yaml": """
        models:
          scripted:
            provider: mock
            replies:
              parse: [{"amount": "a lot"}, "not even json", {"total": 10}]
        tools:
          explode: {import: "yardtools:explode"}
    """,
    "yardtools.py": '''
        from pathlib import Path


        def explode(text: str) -> str:
            """Fails until the file `fixed.flag` exists next to this module."""
            if not (Path(__file__).parent / "fixed.flag").exists():
                raise RuntimeError("the fuse is lit")
            return text + "!"
    ''',
}


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    """The test yard's root."""
    return make_yard({**BLOCKS, **FLOWS, **CONFIG})


def subprocess_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("OPENAI_API_KEY", None)
    return env


def spawn(root: Path, *args: str, **options: Any) -> subprocess.Popen[str]:
    """`python -m engine ARGS` in `root`: a process of its own (forked by the suite's fork server where that
    is the same, tests/support/processes.py)."""
    return processes.Popen(
        [sys.executable, "-m", "engine", *args],
        cwd=root,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def run_engine(root: Path, *args: str, timeout: float = 120) -> Outcome:
    done = processes.run(
        [sys.executable, "-m", "engine", *args],
        cwd=root,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)
