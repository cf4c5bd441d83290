"""http_request against a loopback server: the allow-list, redirects, limits, timeouts."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from engine.core.hosts import host_allowed
from engine.spec import ConfigSpec
from engine.tools import ToolError, ToolRegistry, build_registry
from tests.tools.tool_helpers import LoopbackServer


def registry(tmp_path: Path, **http: Any) -> ToolRegistry:
    return build_registry(ConfigSpec.model_validate({"http": http}), tmp_path)


def request(registry: ToolRegistry, **args: Any) -> Any:
    return asyncio.run(registry.call("http_request", args))


def test_allowed_host_returns_status_headers_and_body(web: LoopbackServer, tmp_path: Path) -> None:
    result = request(registry(tmp_path, allowed_hosts=["127.0.0.1"]), url=web.url("/hello"))
    assert result["status"] == 200
    assert result["body"] == "héllo"
    assert result["truncated"] is False
    assert result["headers"]["content-type"] == "text/plain; charset=utf-8"
    assert result["json"] is None


def test_method_headers_and_json_body_are_sent(web: LoopbackServer, tmp_path: Path) -> None:
    result = request(
        registry(tmp_path, allowed_hosts=["127.0.0.1"]),
        url=web.url("/echo"),
        method="POST",
        headers={"X-Flow": "lunch"},
        json={"order": 7},
    )
    echoed = result["json"]
    assert echoed["method"] == "POST"
    assert echoed["headers"]["x-flow"] == "lunch"
    assert echoed["body"] == '{"order":7}'


def test_error_statuses_are_results(web: LoopbackServer, tmp_path: Path) -> None:
    result = request(registry(tmp_path, allowed_hosts=["127.0.0.1"]), url=web.url("/missing"))
    assert (result["status"], result["body"]) == (404, "no such page")


def test_hosts_not_allowed_are_refused(web: LoopbackServer, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"host '127.0.0.1' is not in http.allowed_hosts") as caught:
        request(registry(tmp_path, allowed_hosts=["api.example.com"]), url=web.url("/hello"))
    assert (
        str(caught.value)
        == "tool 'http_request': host '127.0.0.1' is not in http.allowed_hosts of blockyard.yaml"
    )
    with pytest.raises(ToolError, match=re.escape("none are allowed yet")):
        request(registry(tmp_path), url=web.url("/hello"))


def test_redirects_to_other_hosts_are_refused(web: LoopbackServer, tmp_path: Path) -> None:
    tools = registry(tmp_path, allowed_hosts=["127.0.0.1"])
    followed = request(tools, url=web.url("/redirect?to=" + web.url("/hello")))
    assert followed["body"] == "héllo"
    with pytest.raises(ToolError, match=re.escape("host 'localhost' is not in http.allowed_hosts")):
        request(tools, url=web.url("/redirect?to=" + web.url("/hello", host="localhost")))


def test_body_is_truncated_at_max_bytes(web: LoopbackServer, tmp_path: Path) -> None:
    result = request(
        registry(tmp_path, allowed_hosts=["127.0.0.1"], max_bytes=1000), url=web.url("/big")
    )
    assert result["truncated"] is True
    assert result["body"] == "x" * 1000


def test_timeout_is_a_tool_error(web: LoopbackServer, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="timed out after 200ms") as caught:
        request(
            registry(tmp_path, allowed_hosts=["127.0.0.1"], timeout="200ms"), url=web.url("/slow")
        )
    assert str(caught.value) == f"tool 'http_request': GET {web.url('/slow')} timed out after 200ms"


def test_connection_failures_and_bad_urls(tmp_path: Path) -> None:
    tools = registry(tmp_path, allowed_hosts=["127.0.0.1"])
    with pytest.raises(ToolError, match=re.escape("failed: ConnectError")):
        request(tools, url="http://127.0.0.1:9/")
    with pytest.raises(
        ToolError, match=re.escape("'file:///etc/passwd' is not an http:// or https:// URL")
    ):
        request(tools, url="file:///etc/passwd")
    with pytest.raises(ToolError, match=re.escape("give `body` or `json`, not both")):
        request(tools, url="http://127.0.0.1:9/", body="a", json={})


@pytest.mark.parametrize(
    ("host", "port", "allowed", "expected"),
    [
        ("api.example.com", 443, ["api.example.com"], True),
        ("API.Example.com.", 443, ["api.example.com"], True),
        ("example.com", 443, ["api.example.com"], False),
        ("eu.api.example.com", 443, ["*.example.com"], True),
        ("example.com", 443, ["*.example.com"], False),
        ("badexample.com", 443, ["*.example.com"], False),
        ("localhost", 8080, ["localhost:8080"], True),
        ("localhost", 8081, ["localhost:8080"], False),
        ("localhost", 8081, ["localhost"], True),
        ("evil.com", 443, [], False),
    ],
)
def test_host_patterns(host: str, port: int, allowed: list[str], expected: bool) -> None:
    assert host_allowed(host, port, allowed) is expected
