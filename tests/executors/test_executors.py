"""The generic executors of the kinds without a model: transform, tool, wait."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from engine.compile import RunContext
from engine.executors import BlockCall, prepare
from engine.executors.tool import shape
from engine.nodes.errors import Problem
from engine.spec import BlockSpec, parse_block


class Tools:
    def __init__(self, result: Any) -> None:
        self.result = result
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get(self, name: str) -> Any:
        return None

    async def call(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, dict(args)))
        return self.result


async def _await(pending: Awaitable[Any]) -> Any:
    return await pending


def call(block: BlockSpec, inputs: dict[str, Any], tools: Any = None) -> Any:
    events: list[Any] = []
    context = RunContext(run_id="r", models=None, tools=tools, workspace=Path("."))  # type: ignore[arg-type]
    executor = prepare(block, "flow 'f', step 's'")
    result: Any = asyncio.run(
        _await(executor(BlockCall("f", "s", "s", block, inputs, context, events.append)))
    )
    return result, events


def block(**data: Any) -> BlockSpec:
    return parse_block({"block": "b", **data})


def test_transform_sees_only_its_inputs() -> None:
    spec = block(
        kind="transform",
        inputs={"price": {"type": "number"}, "qty": {"type": "integer"}},
        outputs={"total": {"type": "number"}, "label": {"type": "string"}},
        compute={"total": "price * qty", "label": "'big' if price * qty > 10 else 'small'"},
    )
    assert call(spec, {"price": 2.5, "qty": 6})[0] == {"total": 15.0, "label": "big"}
    with pytest.raises(
        Problem, match=r"^compute 'total': cannot evaluate 'price \* qty': 'price' is undefined$"
    ):
        call(spec, {"qty": 1})


def test_tool_calls_its_tool_with_the_inputs_and_emits_an_event() -> None:
    spec = block(
        kind="tool",
        tool="search",
        inputs={"q": {"type": "string"}},
        outputs={"hits": {"type": "array"}},
    )
    tools = Tools(["a", "b"])
    result, events = call(spec, {"q": "cats"}, tools)
    assert result == {"hits": ["a", "b"]}  # one output: the return value is that output
    assert tools.calls == [("search", {"q": "cats"})]
    assert events == [
        {
            "type": "tool_call",
            "step": "s",
            "data": {"tool": "search", "args": {"q": "cats"}, "block": "b"},
        }
    ]


@pytest.mark.parametrize(
    ("result", "outputs", "shaped"),
    [
        ({"a": 1, "b": 2}, ["a", "b"], {"a": 1, "b": 2}),
        ({"a": 1}, ["a"], {"a": 1}),  # a dict with exactly the output keys is taken as is
        ({"x": 1}, ["a"], {"a": {"x": 1}}),  # otherwise a single output receives the value
        ("anything", [], {}),  # no outputs: the value is not kept
        ({"a": 1}, ["a", "b"], {"a": 1}),  # several outputs: the dict is checked later
    ],
)
def test_tool_results_are_shaped_into_outputs(result: Any, outputs: list[str], shaped: Any) -> None:
    assert shape(result, outputs) == shaped


def test_wait_sleeps_for_its_duration() -> None:
    spec = block(kind="wait", duration="20ms")
    loop = asyncio.new_event_loop()
    try:
        started = loop.time()
        context = RunContext(run_id="r", models=None, tools=None, workspace=Path("."))  # type: ignore[arg-type]
        executor = prepare(spec, "flow 'f', step 's'")
        assert (
            loop.run_until_complete(executor(BlockCall("f", "s", "s", spec, {}, context, print)))
            == {}
        )
        assert loop.time() - started >= 0.02
    finally:
        loop.close()
