"""MCP servers as tool sources: a real stdio server (a subprocess speaking MCP), its allow-listed
tools in the registry and in an agent's hands, failures, the environment, and the missing extra."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.definitions.project import load_project
from engine.spec import ConfigSpec
from engine.tools import ToolError, build_registry
from engine.validate.semantic import check_project
from tests.agents.agent_kit import run_flow

Yard = Callable[[dict[str, str]], Path]

SERVER = '''
import os
from mcp.server.fastmcp import FastMCP

app = FastMCP("demo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool()
def fail(reason: str = "no") -> str:
    """Always fails."""
    raise ValueError(reason)


@app.tool()
def token() -> str:
    """The DEMO_TOKEN the server was started with."""
    return os.environ.get("DEMO_TOKEN", "")


@app.tool()
def hidden() -> str:
    """Not in the allow-list."""
    return "leak"


app.run()
'''


def config(tools: str = "[add, fail, token]", extra: str = "") -> str:
    return (
        f"mcp:\n  demo:\n    command: {sys.executable}\n    args: [server.py]\n    tools: {tools}\n"
        f"    env: {{DEMO_TOKEN: '${{DEMO_SOURCE}}'}}\n{extra}"
    )


def test_allow_listed_tools_are_described_by_the_server_and_called(
    make_yard: Yard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_SOURCE", "x")
    root = make_yard({"server.py": SERVER, "blockyard.yaml": config()})
    registry = build_registry(load_project(root).config, root)
    assert registry.get("add") is None  # nothing is started before a tool is needed
    assert {"add", "fail", "token"} <= set(registry.names()) and "hidden" not in registry.names()

    async def go() -> tuple[object, object]:
        add = await registry.aget("add")
        return add, await registry.call("add", {"a": 2, "b": 40})

    add, total = asyncio.run(go())
    assert add is not None and add.description == "Add two numbers."  # type: ignore[attr-defined]
    assert add.parameters["required"] == ["a", "b"]  # type: ignore[attr-defined]
    assert total == {"result": 42}
    with pytest.raises(ToolError, match=r"tool 'add': invalid arguments: at 'a'") as bad:
        asyncio.run(registry.call("add", {"a": "two", "b": 1}))  # checked before the server sees it
    assert str(bad.value) == "tool 'add': invalid arguments: at 'a': 'two' is not of type 'integer'"


def test_an_allow_listed_tool_the_server_lacks(make_yard: Yard) -> None:
    root = make_yard({"server.py": SERVER, "blockyard.yaml": config("[add, ad]")})
    registry = build_registry(load_project(root).config, root)
    # ${DEMO_SOURCE} is needed to start the server
    with pytest.raises(ToolError, match="env needs the environment variable DEMO_SOURCE") as unset:
        asyncio.run(registry.aget("add"))
    assert (
        str(unset.value)
        == "MCP server 'demo': env needs the environment variable DEMO_SOURCE, which is not set"
    )
    registry._mcp.env = {"DEMO_SOURCE": "x"}  # type: ignore[union-attr]
    with pytest.raises(ToolError, match="MCP server 'demo' has no tool 'ad'") as missing:
        asyncio.run(registry.aget("add"))
    assert str(missing.value) == (
        "MCP server 'demo' has no tool 'ad' (did you mean 'add'?) (it offers: add, fail, "
        "hidden, token)"
    )


def test_an_agent_calls_mcp_tools_and_hears_their_failures(
    make_yard: Yard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_SOURCE", "from-the-environment")
    replies = (
        "{lead: [{$tool_calls: [{name: add, args: {a: 1, b: 2}}, {name: fail, args: {reason: nope}},"
        " {name: token, args: {}}]}, {answer: done}]}"
    )
    root = make_yard(
        {
            "server.py": SERVER,
            "blockyard.yaml": config(
                extra=f"models:\n  default:\n    provider: mock\n    replies: {replies}\n"
            ),
            "blocks/helper.yaml": """
            block: helper
            kind: agent
            outputs: {answer: {type: string}}
            prompt: {user: Use the tools.}
            tools: [add, fail, token]
        """,
            "flows/one.yaml": "flow: one\noutputs: [answer]\nsteps:\n  - {id: lead, uses: helper}\n",
        }
    )
    done = run_flow(root, "one")

    assert done.outputs == {"answer": "done"}, done.error
    results = {
        e.data["tool"]: e.data for e in done.of("tool_call") if e.data["status"] != "started"
    }
    assert results["add"]["result"] == {"result": 3}
    assert (
        results["fail"]["error"]
        == "tool 'fail' (MCP server 'demo') failed: Error executing tool fail: nope"
    )
    assert results["token"]["result"] == {"result": "from-the-environment"}


def test_validate_knows_the_allow_list_without_starting_anything(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blockyard.yaml": "mcp:\n  gone:\n    command: /nonexistent/server\n    tools: [lookup]\n",
            "blocks/helper.yaml": """
            block: helper
            kind: agent
            outputs: {answer: {type: string}}
            prompt: {user: Look it up.}
            tools: [lookup, lookdown]
        """,
        }
    )
    found = [f"{d.code} {d.message}" for d in check_project(load_project(root))]
    assert len(found) == 1 and found[0].startswith("BY501 block 'helper': unknown tool 'lookdown'")


def test_without_the_extra_the_message_names_it(
    make_yard: Yard, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec  # the module engine/tools/mcp.py asks
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "langchain_mcp_adapters" else real(name, *a),
    )
    registry = build_registry(
        ConfigSpec.model_validate({"mcp": {"demo": {"command": "x", "tools": ["add"]}}}),
        make_yard({}),
    )
    with pytest.raises(ToolError, match="the mcp extra is not installed") as caught:
        asyncio.run(registry.call("add", {}))
    assert str(caught.value) == (
        "MCP server 'demo' needs the MCP client, and the mcp extra is not installed: "
        "pip install 'langchain-mcp-adapters>=0.1' 'mcp>=1.9'"
    )


def test_a_tool_name_clash_is_refused(make_yard: Yard) -> None:
    with pytest.raises(ToolError, match="has the name of a built-in or Python tool") as caught:
        build_registry(
            ConfigSpec.model_validate({"mcp": {"demo": {"command": "x", "tools": ["read_file"]}}}),
            make_yard({}),
        )
    assert str(caught.value) == (
        "tool 'read_file' of MCP server 'demo' has the name of a built-in or Python tool; "
        "leave it out of the server's `tools:`"
    )
