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

from engine.errors import BlockyardError
from engine.serve import problems
from engine.serve.middleware import AccessLogMiddleware, AuthMiddleware, BodyLimitMiddleware, HostMiddleware
from engine.serve.routes import flows, meta, plans, runs, threads
from engine.serve.routes.meta import WEB
from engine.serve.server import Server, Settings
from engine.version import __version__


def create_app(settings: Settings | Server) -> FastAPI:
    """The app for one yard; pass a Server to keep a handle on its parts (tests, benchmarks)."""
    server = settings if isinstance(settings, Server) else Server(settings)
    app = FastAPI(title="Blockyard", version=__version__, lifespan=server.lifespan, docs_url="/docs",
                  redoc_url=None, description="Run flows, follow their events, decide approvals, hold conversations. "
                                              "See docs/serve.md.")
    app.state.server = server
    app.include_router(meta.router)
    app.include_router(flows.router)
    app.include_router(runs.router)
    app.include_router(threads.router)
    app.include_router(plans.router)
    app.mount("/static", StaticFiles(directory=WEB), name="static")
    app.add_exception_handler(problems.ApiError, problems.api_error)
    app.add_exception_handler(RequestValidationError, problems.validation_error)
    app.add_exception_handler(HTTPException, problems.http_error)
    app.add_exception_handler(BlockyardError, problems.engine_error)
    app.add_exception_handler(Exception, problems.internal_error)
    # the last added runs first: log, then Host, then token, then the body limit
    app.add_middleware(BodyLimitMiddleware, limit=lambda: server.catalog.server.max_body_bytes)
    app.add_middleware(AuthMiddleware, token=server.settings.token)
    app.add_middleware(HostMiddleware, token=server.settings.token, bound_host=server.settings.host,
                       bound_port=server.settings.port, allowed=lambda: server.catalog.server.allowed_hosts)
    app.add_middleware(AccessLogMiddleware)
    return app
