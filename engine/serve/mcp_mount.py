"""Route `/mcp` to the MCP server of the yard's flows (engine/serve/mcp_tools.py, docs/mcp.md); everything else
goes on to the server's own routes.

It sits inside the Host, token and body-limit middleware (engine/serve/app.py), like the LangGraph API's mount:
`/mcp` is guarded exactly like the rest of the server. The `mcp` library (the `mcp` extra) is imported at the
first request to `/mcp`, so a server without it starts, and answers there what to install.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.core import extras
from engine.serve.problems import body
from engine.serve.server import Server

PATH = "/mcp"


class McpMount:
    def __init__(self, app: ASGIApp, server: Server) -> None:
        self.app = app
        self.server = server
        self._mcp: Any = None  # the MCP server (mcp_tools.build), made at the first request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in (PATH, PATH + "/"):
            await self.app(scope, receive, send)
            return
        try:
            from engine.serve import mcp_tools  # the mcp extra: see the module's docstring
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] != "mcp":
                raise
            await JSONResponse(
                body("mcp_unavailable", f"/mcp needs the mcp extra, and {extras.missing('mcp')}"),
                status_code=501,
            )(scope, receive, send)
            return
        if self._mcp is None:
            self._mcp = mcp_tools.build(self.server)
        await mcp_tools.handle_http(self._mcp, scope, receive, send)
