"""Tools from MCP servers (the optional `mcp` extra, langchain-mcp-adapters).

    mcp:
      files:
        command: npx
        args: [-y, "@modelcontextprotocol/server-filesystem", ./data]
        tools: [read_text_file, list_directory]     # the allow-list: only these are offered
      search:
        url: https://mcp.example.com/mcp
        tools: [web_search]

A server's tools join the registry under their own names, and only those in its `tools:`
allow-list (validate knows the names without starting anything). The servers are asked for their
tool schemas once per yard load, on first use; each call opens a session of its own (a stdio
server is started for it), so nothing outlives a call and any event loop can make one. Values of
`env` written as `${NAME}` come from the environment when the server starts: keys stay out of
blockyard.yaml.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.core import extras
from engine.core.diagnostics import did_you_mean
from engine.spec import McpServerSpec, parse_duration
from engine.tools.errors import ToolError
from engine.tools.tool import Tool

EXTRA = "mcp"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpSource:
    """The allow-listed tools of a yard's MCP servers, described on first use (once)."""

    def __init__(
        self, servers: Mapping[str, McpServerSpec], root: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.servers = dict(servers)
        self.root = root
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.owner = {tool: server for server, spec in self.servers.items() for tool in spec.tools}
        self._tools: dict[str, Tool] | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"McpSource(servers={sorted(self.servers)!r})"

    def names(self) -> list[str]:
        return sorted(self.owner)

    def loaded(self, name: str) -> Tool | None:
        return self._tools.get(name) if self._tools is not None else None

    async def tools(self) -> dict[str, Tool]:
        """Every allow-listed tool, described by its server (asked once)."""
        if self._tools is not None:
            return self._tools
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:  # a lock belongs to one event loop
            self._lock, self._loop = asyncio.Lock(), loop
        async with self._lock:
            if self._tools is None:
                found: dict[str, Tool] = {}
                for server in self.servers:
                    found.update(await self._describe(server))
                self._tools = found
        return self._tools

    async def _describe(self, server: str) -> dict[str, Tool]:
        spec = self.servers[server]
        try:
            async with self._session(server) as session:
                await session.initialize()
                listed = await session.list_tools()
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(
                f"MCP server '{server}': cannot list its tools: {_explain(exc)}"
            ) from None
        offered = {tool.name: tool for tool in listed.tools}
        tools: dict[str, Tool] = {}
        for name in spec.tools:
            tool = offered.get(name)
            if tool is None:
                raise ToolError(
                    f"MCP server '{server}' has no tool '{name}'{did_you_mean(name, offered)} "
                    f"(it offers: {', '.join(sorted(offered)) or 'none'})"
                )
            schema = dict(tool.inputSchema or {"type": "object"})
            tools[name] = Tool(
                name=name,
                description=tool.description or name,
                parameters=schema,
                func=self._caller(server, name, parse_duration(spec.timeout)),
            )
        return tools

    def _caller(self, server: str, name: str, timeout: float) -> Any:
        async def call(**arguments: Any) -> Any:
            try:
                async with asyncio.timeout(timeout):
                    async with self._session(server) as session:
                        await session.initialize()
                        result = await session.call_tool(name, arguments)
            except TimeoutError:
                raise ToolError(
                    f"tool '{name}' (MCP server '{server}') timed out after "
                    f"{self.servers[server].timeout}"
                ) from None
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(
                    f"tool '{name}' (MCP server '{server}') failed: {_explain(exc)}"
                ) from None
            return _result(server, name, result)

        return call

    def _session(self, server: str) -> Any:
        if importlib.util.find_spec("langchain_mcp_adapters") is None:
            raise ToolError(
                f"MCP server '{server}' needs the MCP client, and {extras.missing(EXTRA)}"
            )
        # the optional extra, checked above
        from langchain_mcp_adapters.sessions import create_session

        return create_session(self._connection(server))  # type: ignore[arg-type]

    def _connection(self, server: str) -> dict[str, Any]:
        spec = self.servers[server]
        transport = spec.transport or ("stdio" if spec.command else "streamable_http")
        if transport == "stdio":
            if not spec.command:
                raise ToolError(f"MCP server '{server}': the stdio transport needs `command`")
            connection: dict[str, Any] = {
                "transport": "stdio",
                "command": spec.command,
                "args": list(spec.args),
                "cwd": str(self.root),
            }
            if spec.env:
                from mcp.client.stdio import get_default_environment  # the optional MCP extra

                connection["env"] = {
                    **get_default_environment(),
                    **{k: self._expand(server, v) for k, v in spec.env.items()},
                }
            return connection
        if not spec.url:
            raise ToolError(f"MCP server '{server}': the {transport} transport needs `url`")
        return {"transport": transport, "url": spec.url}

    def _expand(self, server: str, value: str) -> str:
        def variable(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in self.env:
                raise ToolError(
                    f"MCP server '{server}': env needs the environment variable {name}, which is not set"
                )
            return self.env[name]

        return _VARIABLE.sub(variable, value)


def _result(server: str, name: str, result: Any) -> Any:
    """An MCP call result as a plain value: its structured content, else its text (parsed when JSON)."""
    texts = [getattr(block, "text", None) for block in result.content or []]
    text = "\n".join(t for t in texts if isinstance(t, str))
    if result.isError:
        raise ToolError(
            f"tool '{name}' (MCP server '{server}') failed: {text or 'an error without a message'}"
        )
    if result.structuredContent is not None:
        return result.structuredContent
    try:
        return json.loads(text)
    except ValueError:
        return text


def _explain(exc: BaseException) -> str:
    # anyio task groups wrap what went wrong in an ExceptionGroup
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
