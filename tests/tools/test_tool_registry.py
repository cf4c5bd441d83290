"""The registry: names, lookups, argument validation, sync and async calls, wrapped failures."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from engine.spec import ConfigSpec
from engine.tools import BUILTIN_TOOLS, Tool, ToolError, ToolRegistry, build_registry


def call(registry: ToolRegistry, name: str, **args: Any) -> Any:
    return asyncio.run(registry.call(name, args))


def adder() -> Tool:
    def add(a: int, b: int = 1) -> dict[str, Any]:
        return {"sum": a + b, "thread": threading.current_thread().name}

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    return Tool("add", "Add two numbers.", schema, add)


def test_builtins_are_registered_under_their_names(tmp_path: Path) -> None:
    registry = build_registry(ConfigSpec(), tmp_path)
    assert set(registry.names()) == BUILTIN_TOOLS
    assert registry.names() == sorted(registry.names())
    tool = registry.get("current_time")
    assert tool is not None and tool.parameters["type"] == "object"
    assert registry.get("nope") is None


def test_sync_tools_run_in_a_worker_thread() -> None:
    registry = ToolRegistry(ConfigSpec(), [adder()])
    result = call(registry, "add", a=2, b=3)
    assert result["sum"] == 5
    assert result["thread"] != threading.main_thread().name


def test_async_tools_are_awaited() -> None:
    async def echo(text: str) -> str:
        await asyncio.sleep(0)
        return text.upper()

    tool = Tool(
        "echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}}, echo
    )
    assert call(ToolRegistry(ConfigSpec(), [tool]), "echo", text="hi") == "HI"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "tool 'add': invalid arguments: 'a' is a required property"),
        ({"a": "two"}, "tool 'add': invalid arguments: at 'a': 'two' is not of type 'integer'"),
        (
            {"a": 1, "c": 2},
            "tool 'add': invalid arguments: Additional properties are not allowed ('c' was unexpected)",
        ),
    ],
)
def test_arguments_are_validated_before_the_call(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=r"^tool 'add': invalid arguments: ") as caught:
        call(ToolRegistry(ConfigSpec(), [adder()]), "add", **args)
    assert str(caught.value) == message


def test_unknown_tool_suggests_a_name() -> None:
    with pytest.raises(ToolError, match="unknown tool 'ad'") as caught:
        call(ToolRegistry(ConfigSpec(), [adder()]), "ad", a=1)
    assert str(caught.value) == "unknown tool 'ad' (did you mean 'add'?)"


def test_exceptions_are_wrapped_naming_the_tool() -> None:
    def broken() -> None:
        raise KeyError("missing")

    tool = Tool("broken", "Fails.", {"type": "object"}, broken)
    with pytest.raises(ToolError, match="tool 'broken' failed: KeyError") as caught:
        call(ToolRegistry(ConfigSpec(), [tool]), "broken")
    assert str(caught.value) == "tool 'broken' failed: KeyError: 'missing'"
    assert isinstance(caught.value.__cause__, KeyError)


def test_with_workspace_rebinds_file_tools_only(tmp_path: Path) -> None:
    base = ToolRegistry(ConfigSpec(), [adder()])
    one, two = base.with_workspace(tmp_path / "one"), base.with_workspace(tmp_path / "two")
    assert one.get("add") is base.get("add")
    call(one, "write_file", path="a.txt", content="first")
    assert (tmp_path / "one" / "a.txt").read_text() == "first"
    assert call(two, "list_files") == {"entries": [], "truncated": False}
    with pytest.raises(ToolError, match="tool 'read_file': this run has no workspace folder"):
        call(base, "read_file", path="a.txt")
