"""Events reach the execution (engine/runtime/execution.py) the same way whether nodes write to our
function directly or through LangGraph's custom stream (the fallback), subflows and parallel map
items included."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import Yard
from engine.runtime import listen

FILES = {
    "blocks/inc.yaml": """
        block: inc
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {n: {type: integer}}
        compute: {n: "n + 1"}
    """,
    "blocks/double.yaml": """
        block: double
        kind: transform
        inputs: {x: {type: integer}}
        outputs: {y: {type: integer}}
        compute: {y: "x * 2"}
    """,
    "flows/child.yaml": """
        flow: child
        inputs: {n: {type: integer}}
        outputs: [n]
        steps:
          - {id: bump, uses: inc, with: {n: "{{ inputs.n }}"}}
    """,
    "flows/parent.yaml": """
        flow: parent
        inputs: {n: {type: integer}}
        outputs: [n, doubled]
        steps:
          - {id: first, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: call, flow: child, with: {n: "{{ context.n }}"}}
          - id: each
            map: {items: "[1, 2, 3]", as: x, uses: double, collect: doubled}
    """,
}


def trace(root: Path) -> tuple[list[tuple[str, str | None]], dict[str, Any]]:
    async def main() -> tuple[list[tuple[str, str | None]], dict[str, Any]]:
        async with Yard.load(root) as yard:
            events = [e async for e in yard.astream("parent", {"n": 1})]
        return [(e.type, e.step) for e in events if e.type.startswith("step_")], events[-1].data[
            "outputs"
        ]

    return asyncio.run(main())


@pytest.fixture
def parent(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(FILES)


def test_direct_path_is_used_and_complete(parent: Path) -> None:
    steps, outputs = trace(parent)
    assert asyncio.run(listen.direct_supported()) is True
    assert outputs == {"n": 3, "doubled": [{"y": 2}, {"y": 4}, {"y": 6}]}
    assert steps[:6] == [
        ("step_started", "first"),
        ("step_finished", "first"),
        ("step_started", "call"),
        ("step_started", "call.bump"),
        ("step_finished", "call.bump"),
        ("step_finished", "call"),
    ]
    # the map step starts and ends once, and so does each of its three items
    assert steps[6:] == [("step_started", "each")] + [
        ("step_started", "each"),
        ("step_finished", "each"),
    ] * 3 + [("step_finished", "each")]


def test_custom_stream_fallback_gives_the_same_events(
    parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = trace(parent)
    monkeypatch.setattr(listen, "_direct", False)
    assert trace(parent) == direct
