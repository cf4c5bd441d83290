"""Fixtures of the smart-block tests: a running OpenAI stub; helpers shared with the agent tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.openai_stub import OpenAIStub

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))  # agent_kit: runs through the runtime


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server
