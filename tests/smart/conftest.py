"""Fixtures of the smart-block tests: a running OpenAI stub; helpers shared with the agent tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_stub import OpenAIStub


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server
