"""CORS for browser clients on other origins (`server.cors_origins`, docs/serve.md): real HTTP to a real server.

A chat UI on http://localhost:3000 calls the server from the browser. The browser first sends a preflight
(OPTIONS, no credentials) and then the request with the token; it lets the page read an answer only when the
answer carries `Access-Control-Allow-Origin` for the page's origin.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.serve.serve_helpers import YARD, Live
from tests.support.loopback import LOOPBACK

UI = "http://localhost:3000"
TOKEN = "s3cret"
ASKS = "authorization, content-type, x-api-key, last-event-id"


def preflight(
    live: Live,
    path: str,
    origin: str = UI,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    return httpx.options(
        live.url + path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": ASKS,
            **(headers or {}),
        },
        verify=LOOPBACK,
    )


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {
        name: value
        for name, value in response.headers.items()
        if name.startswith("access-control-")
    }


def serve_with(
    make_yard: Callable[[dict[str, str]], Path],
    serve: Callable[..., Live],
    config: str,
    token: str | None = TOKEN,
) -> Live:
    return serve(
        make_yard({**YARD, "blockyard.yaml": config}), watch=False, schedules=False, token=token
    )


def test_a_preflight_from_a_listed_origin_is_answered_without_the_token(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve_with(
        make_yard,
        serve,
        "server:\n  cors_origins: ['http://LocalHost:3000', 'https://chat.example']\n",
    )
    for path, method in (
        ("/lg/threads/x/runs/stream", "POST"),
        ("/lg/threads/x", "DELETE"),
        ("/flows", "GET"),
    ):
        answer = preflight(live, path, method=method)
        assert answer.status_code == 200, (path, answer.text)
        allowed = cors_headers(answer)
        # the listed origin, lower-cased as browsers send it
        assert allowed["access-control-allow-origin"] == UI
        assert method in allowed["access-control-allow-methods"].split(", ")
        assert {"authorization", "x-api-key", "content-type", "last-event-id"} <= {
            name.lower() for name in allowed["access-control-allow-headers"].split(", ")
        }
    assert (
        preflight(live, "/lg/info", origin="https://chat.example").headers[
            "access-control-allow-origin"
        ]
        == "https://chat.example"
    )


def test_the_request_itself_still_needs_the_token_and_its_answer_is_readable(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve_with(make_yard, serve, f"server:\n  cors_origins: ['{UI}']\n")
    refused = httpx.post(
        live.url + "/lg/assistants/search", json={}, headers={"Origin": UI}, verify=LOOPBACK
    )
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert refused.headers["access-control-allow-origin"] == UI  # so the page can tell the user why
    keyed = {"Origin": UI, "X-Api-Key": TOKEN}
    found = httpx.post(
        live.url + "/lg/assistants/search", json={"limit": 100}, headers=keyed, verify=LOOPBACK
    )
    assert found.status_code == 200 and "add" in [a["assistant_id"] for a in found.json()]
    assert found.headers["access-control-allow-origin"] == UI
    # a created run names itself in Location / Content-Location, which langgraph-sdk clients read
    thread = httpx.post(live.url + "/lg/threads", json={}, headers=keyed, verify=LOOPBACK).json()[
        "thread_id"
    ]
    run = httpx.post(
        f"{live.url}/lg/threads/{thread}/runs",
        json={"assistant_id": "add", "input": {"a": 1}},
        headers=keyed,
        verify=LOOPBACK,
    )
    assert run.status_code == 200 and "content-location" in run.headers
    exposed = {
        name.strip().lower() for name in run.headers["access-control-expose-headers"].split(",")
    }
    assert {"location", "content-location"} <= exposed
    own_api = httpx.get(
        live.url + "/flows",
        headers={"Origin": UI, "Authorization": f"Bearer {TOKEN}"},
        verify=LOOPBACK,
    )
    assert own_api.status_code == 200 and own_api.headers["access-control-allow-origin"] == UI


def test_other_origins_get_no_cors_headers(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve_with(make_yard, serve, f"server:\n  cors_origins: ['{UI}']\n")
    for origin in ("https://evil.example", "http://localhost:3001", "https://localhost:3000"):
        answer = preflight(live, "/lg/assistants/search", origin=origin)
        # not answered: a plain request
        assert answer.status_code == 401 and cors_headers(answer) == {}, origin
        read = httpx.post(
            live.url + "/lg/assistants/search",
            json={},
            headers={"Origin": origin, "Authorization": f"Bearer {TOKEN}"},
            verify=LOOPBACK,
        )
        assert read.status_code == 200 and cors_headers(read) == {}, origin
    # and no list at all (the default): no CORS for anyone
    plain = serve_with(make_yard, serve, "server: {}\n")
    answer = preflight(plain, "/lg/assistants/search")
    assert answer.status_code == 401 and cors_headers(answer) == {}
    read = httpx.get(
        plain.url + "/flows",
        headers={"Origin": UI, "Authorization": f"Bearer {TOKEN}"},
        verify=LOOPBACK,
    )
    assert read.status_code == 200 and cors_headers(read) == {}


def test_the_host_check_comes_before_cors(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve_with(make_yard, serve, f"server:\n  cors_origins: ['{UI}']\n", token=None)
    rebound = preflight(live, "/runs", headers={"Host": "evil.example"})
    assert rebound.status_code == 421 and rebound.json()["error"]["code"] == "host_not_allowed"
    assert cors_headers(rebound) == {}
    assert preflight(live, "/runs").status_code == 200  # its own name: answered


def test_a_reload_applies_the_list(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve_with(make_yard, serve, f"server:\n  cors_origins: ['{UI}']\n")
    assert preflight(live, "/flows").status_code == 200
    (live.server.root / "blockyard.yaml").write_text(
        "server:\n  cors_origins: ['https://chat.example']\n", encoding="utf-8"
    )
    assert live.loop is not None
    asyncio.run_coroutine_threadsafe(live.server.reloader.reload(), live.loop).result(timeout=30)
    assert live.server.catalog.server.cors_origins == ["https://chat.example"]
    assert cors_headers(preflight(live, "/flows")) == {}
    assert preflight(live, "/flows", origin="https://chat.example").status_code == 200


def test_a_browser_page_may_call_the_mcp_tools(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve_with(make_yard, serve, f"server:\n  cors_origins: ['{UI}']\n")
    allowed = cors_headers(preflight(live, "/mcp", method="POST"))
    assert "mcp-protocol-version" in {
        name.lower() for name in allowed["access-control-allow-headers"].split(", ")
    }
    page = {"name": "page", "version": "1"}
    headers = {
        "Origin": UI,
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
    }
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": page},
    }
    answer = httpx.post(live.url + "/mcp", json=hello, headers=headers, verify=LOOPBACK)
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == UI, (
        answer.text
    )
    assert "mcp-session-id" not in answer.headers  # stateless: every request whole in itself
    version = answer.json()["result"]["protocolVersion"]
    listed = httpx.post(
        live.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={**headers, "Mcp-Protocol-Version": version},
        verify=LOOPBACK,
    )
    assert listed.status_code == 200 and listed.headers["access-control-allow-origin"] == UI
    assert "resume_run" in [tool["name"] for tool in listed.json()["result"]["tools"]]
