"""A server on the example yard (plus a gated, a slow and an emitting flow) for the LangGraph API tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.serve.server import Settings
from tests.serve.serve_helpers import ADDER, GATED_FLOW, SLOW_FLOW, Live, start_live
from tests.support.usage_llm import UsageLLM

REPO = Path(__file__).resolve().parents[3]

INC = """
block: inc
version: 1
description: Add one.
kind: transform
inputs:
  n: {type: integer}
outputs:
  n: {type: integer}
compute:
  n: "n + 1"
"""

COUNT = """
flow: count
version: 1
description: Count and tell.
inputs: {}
outputs: [n]
steps:
  - id: one
    uses: inc
    with: {n: 41}
    emit: {event: progress, data: {done: "{{ context.n }}"}}
"""

NAP = """
block: nap
version: 1
description: Wait long enough for a test to look at a run going on.
kind: wait
duration: 3s
"""

SLEEPY = """
flow: sleepy
version: 1
description: Wait a few seconds.
inputs: {}
outputs: []
steps:
  - id: nap
    uses: nap
"""

EXTRA = {
    "blocks/adder.yaml": ADDER,
    "blocks/inc.yaml": INC,  # the example yard has a `pause` block
    "blocks/nap.yaml": NAP,
    "flows/gated.yaml": GATED_FLOW,
    "flows/slow.yaml": SLOW_FLOW,
    "flows/count.yaml": COUNT,
    "flows/sleepy.yaml": SLEEPY,
}


def example_yard(root: Path, extra: dict[str, str] | None = None) -> Path:
    """A copy of the repository's example yard, with `extra` files added."""
    for name in ("flows", "blocks", "prompts"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "blockyard.yaml", root / "blockyard.yaml")
    for name, text in (extra if extra is not None else EXTRA).items():
        (root / name).write_text(text.lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    server = start_live(
        Settings(
            root=example_yard(tmp_path_factory.mktemp("yard")),
            watch=False,
            schedules=False,
            grace=5.0,
            poll=0.1,
        )
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def llm() -> Iterator[UsageLLM]:
    """A loopback OpenAI-compatible model server that records what each call was sent."""
    with UsageLLM() as server:
        yield server
