"""Fixtures of the agent tests: a running OpenAI stub."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_stub import OpenAIStub


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server
