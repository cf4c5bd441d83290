"""http_request: HTTP calls to the hosts listed in blockyard.yaml `http.allowed_hosts` only.

Every request, redirects included, is checked against the allow-list; the body read is bounded
by `http.max_bytes` (the rest is dropped and `truncated` is set) and the call by `http.timeout`.
Error statuses are results, not failures: the flow decides what a 404 means.
"""

from __future__ import annotations

import json as jsonlib
from typing import Any
from urllib.parse import urlsplit

from engine.core.hosts import host_allowed
from engine.core.values import JsonDict
from engine.spec import parse_duration
from engine.spec.config import HttpSpec
from engine.tools.errors import ToolError
from engine.tools.tool import Tool

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
MAX_REDIRECTS = 5
_DEFAULT_PORTS = {"http": 80, "https": 443}

PARAMETERS: JsonDict = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "http:// or https:// URL on an allowed host."},
        "method": {"enum": METHODS, "default": "GET", "description": "HTTP method."},
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Request headers.",
        },
        "body": {"type": "string", "description": "Raw request body."},
        "json": {"description": "A JSON request body (instead of body)."},
    },
    "required": ["url"],
    "additionalProperties": False,
}


def tool(settings: HttpSpec) -> Tool:
    """The http_request tool with the yard's limits."""
    timeout = parse_duration(settings.timeout)
    allowed = list(settings.allowed_hosts)

    def check(url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ToolError(f"tool 'http_request': '{url}' is not an http:// or https:// URL")
        port = parts.port or _DEFAULT_PORTS[parts.scheme]
        if not host_allowed(parts.hostname, port, allowed):
            hint = "; none are allowed yet" if not allowed else ""
            raise ToolError(
                f"tool 'http_request': host '{parts.hostname}' is not in http.allowed_hosts "
                f"of blockyard.yaml{hint}"
            )

    async def http_request(
        url: str,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: str | None = None,
        json: Any = None,
    ) -> JsonDict:
        import httpx  # imported on use: `blockyard validate` loads the registry's names only

        if body is not None and json is not None:
            raise ToolError("tool 'http_request': give `body` or `json`, not both")
        check(url)

        async def on_request(request: httpx.Request) -> None:
            check(str(request.url))  # redirects too

        client = httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            event_hooks={"request": [on_request]},
        )
        try:
            async with (
                client,
                client.stream(method, url, headers=headers, content=body, json=json) as response,
            ):
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data.extend(chunk)
                    if len(data) > settings.max_bytes:
                        break
                return _result(response, bytes(data), settings.max_bytes)
        except httpx.TimeoutException:
            raise ToolError(
                f"tool 'http_request': {method} {url} timed out after {settings.timeout}"
            ) from None
        except httpx.HTTPError as exc:
            raise ToolError(
                f"tool 'http_request': {method} {url} failed: {type(exc).__name__}: {exc}"
            ) from None

    return Tool(
        name="http_request",
        description="Make an HTTP request to an allowed host; returns status, headers and body.",
        parameters=PARAMETERS,
        func=http_request,
    )


def _result(response: Any, data: bytes, limit: int) -> JsonDict:
    truncated = len(data) > limit
    text = data[:limit].decode(response.encoding or "utf-8", errors="replace")
    parsed: Any = None
    if not truncated and "json" in response.headers.get("content-type", ""):
        try:
            parsed = jsonlib.loads(text)
        except ValueError:
            parsed = None
    return {
        "status": response.status_code,
        "headers": dict(response.headers),
        "body": text,
        "truncated": truncated,
        "json": parsed,
    }
