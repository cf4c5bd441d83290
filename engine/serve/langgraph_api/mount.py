"""Route the requests under `server.langgraph_prefix` (read on every request, so a reload applies it) to the
LangGraph Server API; everything else goes on to the server's own routes.

It sits inside the Host, token and body-limit middleware (engine/serve/app.py): the API under the prefix is
guarded exactly like the rest of the server.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send


def under(path: str, prefix: str | None) -> bool:
    return prefix is not None and (path == prefix or path.startswith(prefix + "/"))


class LangGraphMount:
    def __init__(self, app: ASGIApp, api: ASGIApp, prefix: Callable[[], str | None]) -> None:
        self.app = app
        self.api = api
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        prefix = self.prefix()
        if scope["type"] != "http" or not under(scope["path"], prefix):
            await self.app(scope, receive, send)
            return
        # Starlette routes on the path less root_path (as its own Mount does): the API sees /threads, /runs, ...
        await self.api(
            {**scope, "root_path": scope.get("root_path", "") + (prefix or "")}, receive, send
        )
