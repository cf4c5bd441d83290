"""The sub-application that answers the LangGraph Server API (mounted by mount.py under the prefix)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from engine.core.errors import BlockyardError
from engine.core.version import __version__
from engine.serve import problems
from engine.serve.langgraph_api import (
    assistants,
    bulk,
    crons,
    runs,
    store,
    thread_stream,
    threads,
)
from engine.serve.server import Server


def create_langgraph_app(server: Server) -> FastAPI:
    """The LangGraph Server API over `server`'s parts; errors have the server's one JSON shape."""
    app = FastAPI(
        title="Blockyard: LangGraph Server API",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.server = server
    for module in (
        assistants,
        bulk,
        crons,
        threads,
        thread_stream,
        runs,
        store,
    ):  # bulk's fixed paths before {id}s
        app.include_router(module.router)
    app.add_exception_handler(problems.ApiError, problems.api_error)
    app.add_exception_handler(RequestValidationError, problems.validation_error)
    app.add_exception_handler(HTTPException, problems.http_error)
    app.add_exception_handler(BlockyardError, problems.engine_error)
    app.add_exception_handler(Exception, problems.internal_error)
    return app
