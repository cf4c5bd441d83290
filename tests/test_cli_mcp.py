"""`blockyard mcp` (docs/mcp.md): the yard's flows as MCP tools on stdin/stdout, driven by the official `mcp`
client against the real command in a child process, with its state in the yard's SQLite file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from engine.cli import main
from tests.serve.serve_helpers import ADDER, GATED_FLOW
from tests.support.example import copy_example_yard
from tests.support.state import state_db

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def yard(tmp_path: Path) -> Path:
    root = copy_example_yard(tmp_path / "yard")
    (root / "blocks" / "adder.yaml").write_text(ADDER.lstrip("\n"), encoding="utf-8")
    (root / "flows" / "gated.yaml").write_text(GATED_FLOW.lstrip("\n"), encoding="utf-8")
    return root


def params(yard: Path) -> StdioServerParameters:
    env = {
        key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")
    }  # the mock model
    env["PYTHONPATH"] = str(REPO)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine", "mcp", "--root", str(yard)],
        env=env,
        cwd=str(yard),
    )


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def test_blockyard_mcp_serves_the_flows_over_stdio(yard: Path, tmp_path: Path) -> None:
    async def session_work() -> dict[str, Any]:
        with (tmp_path / "stderr.log").open("w", encoding="utf-8") as errlog:
            async with (
                stdio_client(params(yard), errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = {tool.name: tool for tool in (await session.list_tools()).tools}
                hello = await session.call_tool("hello", {"name": "Ada"})
                waiting = await session.call_tool("gated", {"a": 5})
                assert waiting.structuredContent is not None, text_of(waiting)
                resumed = await session.call_tool(
                    "resume_run",
                    {
                        "run_id": waiting.structuredContent["run_id"],
                        "decision": "approve",
                        "values": {"b": 4},
                    },
                )
                return {"tools": tools, "hello": hello, "waiting": waiting, "resumed": resumed}

    got = asyncio.run(asyncio.wait_for(session_work(), timeout=120))
    tools = got["tools"]
    assert {"hello", "gated", "resume_run"} <= set(tools)
    assert tools["hello"].inputSchema["properties"]["name"]["type"] == "string"

    hello: CallToolResult = got["hello"]
    assert not hello.isError, text_of(hello)
    outputs = json.loads(text_of(hello))
    assert "Ada" in outputs["greeting"] and outputs["loud"] == outputs["greeting"].upper()

    waiting: CallToolResult = got["waiting"]
    assert (
        waiting.structuredContent is not None and waiting.structuredContent["status"] == "waiting"
    )
    run_id = waiting.structuredContent["run_id"]
    assert waiting.structuredContent["waiting"][0]["step"] == "ask"
    assert f'run_id "{run_id}"' in text_of(waiting)

    resumed: CallToolResult = got["resumed"]
    assert not resumed.isError, text_of(resumed)
    assert resumed.structuredContent is not None and resumed.structuredContent["outputs"] == {
        "total": 9
    }

    # the runs are the yard's: its state database holds them, as for `blockyard run` (a SQLite file, or the
    # Postgres database of the suite's second pass)
    with state_db(yard) as conn:
        statuses = dict(conn.execute("SELECT id, status FROM runs").fetchall())
    assert (
        statuses[hello.structuredContent["run_id"] if hello.structuredContent else ""] == "finished"
    )
    assert statuses[run_id] == "finished"


def test_blockyard_mcp_refuses_a_folder_that_is_no_yard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "--root", str(tmp_path / "missing")]) == 2
    assert "error" in capsys.readouterr().err
