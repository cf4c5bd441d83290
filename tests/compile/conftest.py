"""Fixtures of the compiler tests (helpers live in compile_kit.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from engine.compile import CompiledFlow, compile_flow
from engine.definitions.pinned import Bundle
from tests.compile.compile_kit import yard_bundle


@pytest.fixture
def build(make_yard: Callable[[dict[str, str]], Path]) -> Callable[..., CompiledFlow]:
    """build(flow_yaml, blocks={...}, subflows={...}) -> CompiledFlow (with an InMemorySaver)."""

    def make(
        flow: str,
        blocks: Mapping[str, str] | None = None,
        subflows: Mapping[str, str] | None = None,
    ) -> CompiledFlow:
        text = textwrap.dedent(flow)
        name = next(
            line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("flow:")
        )
        bundle = yard_bundle(make_yard, {name: text, **(subflows or {})}, blocks, name)
        return compile_flow(bundle, checkpointer=InMemorySaver())

    return make


@pytest.fixture
def bundle_of(make_yard: Callable[[dict[str, str]], Path]) -> Callable[..., Bundle]:
    """bundle_of(flow_yaml, blocks={...}) -> the Bundle, for tests of compile errors."""

    def make(
        flow: str,
        blocks: Mapping[str, str] | None = None,
        subflows: Mapping[str, str] | None = None,
    ) -> Bundle:
        text = textwrap.dedent(flow)
        name = next(
            line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("flow:")
        )
        return yard_bundle(make_yard, {name: text, **(subflows or {})}, blocks, name)

    return make
