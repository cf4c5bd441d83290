"""The yard's flows as MCP tools at /mcp of `blockyard serve` (docs/mcp.md), driven by the official `mcp` client
over Streamable HTTP against a real server on 127.0.0.1: the tools are the flows, a call runs one, a gate's wait
is answered and resumed, and the server's token and Host check guard the endpoint."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.serve.serve_helpers import ADDER, GATED_FLOW, Live, wait_for
from tests.support.example import copy_example_yard
from tests.support.loopback import LOOPBACK

TOKEN = "mcp-s3cret"


@pytest.fixture
def yard(tmp_path: Path) -> Path:
    """The example yard, with a flow that waits at an approval gate."""
    root = copy_example_yard(tmp_path / "yard")
    (root / "blocks" / "adder.yaml").write_text(ADDER.lstrip("\n"), encoding="utf-8")
    (root / "flows" / "gated.yaml").write_text(GATED_FLOW.lstrip("\n"), encoding="utf-8")
    return root


def with_session(
    live: Live, work: Callable[[ClientSession], Awaitable[Any]], token: str | None = TOKEN
) -> Any:
    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(30, read=120), verify=LOOPBACK
            ) as http,
            streamable_http_client(f"{live.url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await work(session)

    return asyncio.run(main())


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def test_the_flows_are_tools_and_hello_answers_its_outputs(
    yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(yard, watch=False, schedules=False, token=TOKEN)

    async def work(session: ClientSession) -> tuple[Any, CallToolResult]:
        return await session.list_tools(), await session.call_tool("hello", {"name": "Ada"})

    listed, result = with_session(live, work)
    tools = {tool.name: tool for tool in listed.tools}
    flows = {
        path.stem for path in (yard / "flows").glob("*.yaml") if not path.stem.endswith(".test")
    }
    assert set(tools) == flows | {"resume_run"}
    hello = tools["hello"]
    assert hello.description and "Greet someone" in hello.description
    assert hello.inputSchema["properties"]["name"] == {
        "type": "string",
        "description": "Who to greet.",
    }
    assert hello.inputSchema["required"] == []  # name has a default
    assert tools["gated"].inputSchema["properties"]["a"]["type"] == "integer"

    assert not result.isError, text_of(result)
    outputs = result.structuredContent["outputs"] if result.structuredContent else None
    # the mock model greets with what it was sent; shout upper-cases it
    assert (
        outputs is not None
        and "Ada" in outputs["greeting"]
        and outputs["loud"] == outputs["greeting"].upper()
    )
    assert set(outputs) == {"greeting", "loud", "words"}
    assert result.structuredContent is not None and result.structuredContent["status"] == "finished"
    assert json.loads(text_of(result)) == outputs
    # the run is the server's like any other: the HTTP API shows it
    with live.client(token=TOKEN) as client:
        run = client.get(f"/runs/{result.structuredContent['run_id']}").json()
    assert run["status"] == "finished" and run["flow"] == "hello"


def test_a_gate_answers_the_wait_and_resume_run_goes_on(
    yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(yard, watch=False, schedules=False, token=TOKEN)

    async def work(session: ClientSession) -> tuple[CallToolResult, CallToolResult]:
        waiting = await session.call_tool("gated", {"a": 5})
        assert waiting.structuredContent is not None
        run_id = waiting.structuredContent["run_id"]
        resumed = await session.call_tool(
            "resume_run", {"run_id": run_id, "decision": "approve", "values": {"b": 4}}
        )
        return waiting, resumed

    waiting, resumed = with_session(live, work)
    assert not waiting.isError, text_of(waiting)
    assert waiting.structuredContent is not None
    assert waiting.structuredContent["status"] == "waiting"
    (gate,) = waiting.structuredContent["waiting"]
    assert gate["step"] == "ask" and gate["message"] == "Add how much?"
    run_id = waiting.structuredContent["run_id"]
    assert run_id in text_of(waiting) and "resume_run" in text_of(waiting)
    assert not resumed.isError, text_of(resumed)
    assert resumed.structuredContent is not None
    assert resumed.structuredContent["run_id"] == run_id
    assert resumed.structuredContent["status"] == "finished"
    assert resumed.structuredContent["outputs"] == {"total": 9}


def test_refusals_are_tool_errors_not_crashes(yard: Path, serve: Callable[..., Live]) -> None:
    live = serve(yard, watch=False, schedules=False, token=TOKEN)

    async def work(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool("gated", {"a": "five"}),
            await session.call_tool("helo", {}),
            await session.call_tool("resume_run", {"run_id": "nope", "decision": "approve"}),
            await session.call_tool("resume_run", {"decision": "maybe", "run_id": "x"}),
        ]

    bad_input, unknown, no_run, bad_decision = with_session(live, work)
    for result in (bad_input, unknown, no_run, bad_decision):
        assert result.isError
    assert "a" in text_of(bad_input)
    assert "unknown flow 'helo'" in text_of(unknown) and "hello" in text_of(unknown)
    assert "unknown run 'nope'" in text_of(no_run)
    assert "decision" in text_of(bad_decision)


def test_the_token_and_the_host_check_guard_mcp(yard: Path, serve: Callable[..., Live]) -> None:
    live = serve(yard, watch=False, schedules=False, token=TOKEN)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    with live.client() as anonymous:
        refused = anonymous.post("/mcp", json=initialize, headers=accept)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["code"] == "unauthorized"
    with live.client(token="wrong") as wrong:
        assert wrong.post("/mcp", json=initialize, headers=accept).status_code == 401
    with live.client(token=TOKEN) as client:
        answered = client.post("/mcp", json=initialize, headers=accept)
        assert answered.status_code == 200, answered.text
        assert answered.json()["result"]["serverInfo"]["name"] == "blockyard"
    # the official client, without the token, is refused too
    with pytest.RaisesGroup(
        pytest.RaisesExc(httpx.HTTPStatusError, match="401 Unauthorized"), flatten_subgroups=True
    ):
        with_session(live, lambda session: session.list_tools(), token=None)
    # without a token the Host check applies (DNS rebinding): /mcp answers only the server's own names
    live.stop()
    open_live = serve(yard, watch=False, schedules=False)
    with open_live.client() as client:
        assert (
            client.post(
                "/mcp", json=initialize, headers={**accept, "Host": "evil.example"}
            ).status_code
            == 421
        )
        assert client.post("/mcp", json=initialize, headers=accept).status_code == 200


def test_the_tool_list_follows_the_yard(yard: Path, serve: Callable[..., Live]) -> None:
    """Hot reload: a flow saved into the yard is a tool at the next listing."""
    live = serve(yard, schedules=False, token=TOKEN)
    (yard / "flows" / "gated_copy.yaml").write_text(
        GATED_FLOW.replace("flow: gated", "flow: gated_copy").lstrip("\n"), encoding="utf-8"
    )
    wait_for(lambda: "gated_copy" in live.server.catalog.flows, timeout=20)

    async def work(session: ClientSession) -> set[str]:
        return {tool.name for tool in (await session.list_tools()).tools}

    assert "gated_copy" in with_session(live, work)


def test_a_yard_may_offer_only_some_flows(yard: Path, serve: Callable[..., Live]) -> None:
    """`server.mcp_flows` lists the flows MCP offers: the others are neither listed nor callable."""
    config = yard / "blockyard.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + "\nserver:\n  mcp_flows: [hello]\n", encoding="utf-8"
    )
    live = serve(yard, watch=False, schedules=False, token=TOKEN)

    async def work(session: ClientSession) -> tuple[set[str], CallToolResult, CallToolResult]:
        names = {tool.name for tool in (await session.list_tools()).tools}
        return (
            names,
            await session.call_tool("gated", {"a": 1}),
            await session.call_tool("hello", {"name": "Bo"}),
        )

    names, left_out, hello = with_session(live, work)
    assert names == {"hello", "resume_run"}
    assert left_out.isError and text_of(left_out) == (
        "flow 'gated' is not offered over MCP (server.mcp_flows in blockyard.yaml lists the flows that are)"
    )
    assert not hello.isError and hello.structuredContent is not None
    assert hello.structuredContent["status"] == "finished"
    with live.client(token=TOKEN) as client:  # nothing ran for the refused call
        assert [run["flow"] for run in client.get("/runs").json()["runs"]] == ["hello"]
