"""The ASGI application of `blockyard serve`: FastAPI routes over the server's parts.

    app = create_app(Settings(root=Path(".")))
    uvicorn.run(app)          # or any ASGI server

OpenAPI docs are at /docs. The web page and its assets are served from engine/serve/web/,
with no build step and nothing fetched from the internet.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from engine.core.errors import BlockyardError
from engine.core.version import __version__
from engine.serve import problems
from engine.serve.langgraph_api.app import create_langgraph_app
from engine.serve.langgraph_api.mount import LangGraphMount
from engine.serve.mcp_mount import McpMount
from engine.serve.middleware import (
    AccessLogMiddleware,
    AuthMiddleware,
    BodyLimitMiddleware,
    CorsMiddleware,
    HostMiddleware,
)
from engine.serve.routes import flows, meta, metrics, plans, runs, stats, threads
from engine.serve.routes.meta import WEB
from engine.serve.server import Server, Settings


def create_app(settings: Settings | Server) -> FastAPI:
    """The app for one yard; pass a Server to keep a handle on its parts (tests, benchmarks)."""
    server = settings if isinstance(settings, Server) else Server(settings)
    app = FastAPI(
        title="Blockyard",
        version=__version__,
        lifespan=server.lifespan,
        docs_url="/docs",
        redoc_url=None,
        description="Run flows, follow their events, decide approvals, hold conversations. "
        "See docs/serve.md.",
    )
    app.state.server = server
    app.include_router(meta.router)
    app.include_router(flows.router)
    app.include_router(runs.router)
    app.include_router(threads.router)
    app.include_router(plans.router)
    app.include_router(stats.router)
    app.include_router(metrics.router)
    app.mount("/static", StaticFiles(directory=WEB), name="static")
    app.add_exception_handler(problems.ApiError, problems.api_error)
    app.add_exception_handler(RequestValidationError, problems.validation_error)
    app.add_exception_handler(HTTPException, problems.http_error)
    app.add_exception_handler(BlockyardError, problems.engine_error)
    app.add_exception_handler(Exception, problems.internal_error)
    # the last added runs first: log, then Host, then CORS (preflights carry no token), then token, then the body
    # limit, then /mcp (the flows as MCP tools: docs/mcp.md), then the LangGraph API's prefix
    app.add_middleware(
        LangGraphMount,
        api=create_langgraph_app(server),
        prefix=lambda: server.catalog.server.langgraph_prefix,
    )
    app.add_middleware(McpMount, server=server)
    app.add_middleware(BodyLimitMiddleware, limit=lambda: server.catalog.server.max_body_bytes)
    app.add_middleware(
        AuthMiddleware,
        token=server.settings.token,
        langgraph_prefix=lambda: server.catalog.server.langgraph_prefix,
    )
    app.add_middleware(CorsMiddleware, origins=lambda: server.catalog.server.cors_origins)
    app.add_middleware(
        HostMiddleware,
        token=server.settings.token,
        bound_host=server.settings.host,
        bound_port=server.settings.port,
        allowed=lambda: server.catalog.server.allowed_hosts,
    )
    app.add_middleware(AccessLogMiddleware)
    return app
