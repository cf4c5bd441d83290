"""`blockyard mcp`: the yard's flows as MCP tools on stdin/stdout, for desktop clients (docs/mcp.md).

The same tools as `/mcp` of `blockyard serve` (engine/serve/mcp_tools.py), over the same parts: a server
(engine/serve/server.py) runs in this process with the yard's state database, its job queue and hot reload,
without the HTTP port and without schedules (a client's helper process is no place for cron). The server's
parts and the `mcp` library are imported when the command runs, not by the CLI's light commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from engine.cli.options import ROOT_OPTION, Command, root_of
from engine.core.errors import UsageError
from engine.definitions.project import load_project
from engine.state import backends
from engine.state.location import of_yard

if TYPE_CHECKING:
    from engine.serve.server import Server


def mcp_command(root: Path, watch: bool) -> int:
    """Serve the yard's flows over stdio until the client closes stdin (or Ctrl-C)."""
    # the server's parts and the mcp extra (see the module's docstring), before anything starts: a missing
    # extra is one line
    from engine.serve import logs, mcp_tools
    from engine.serve.server import Server, Settings

    if not root.is_dir():
        raise UsageError(f"{root}: no such folder (give the yard with --root)")
    del mcp_tools  # imported to be checked; _serve uses it
    config = load_project(root).config
    # a damaged database: one line, exit
    backends.check(of_yard(root, config.paths.state, config.database))
    logs.configure(logging.WARNING)  # stderr: stdout carries the protocol
    server = Server(Settings(root=root, watch=watch, schedules=False))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(server))
    return 0


async def _serve(server: Server) -> None:
    from mcp.server.stdio import stdio_server  # the mcp extra

    from engine.serve import mcp_tools  # (the same)

    await server.startup()
    try:
        app = mcp_tools.build(server)
        async with stdio_server() as (read, write):
            # the protocol's stream holds the real stdout now: anything else printed goes to stderr
            with contextlib.redirect_stdout(sys.stderr):
                await app.run(read, write, app.create_initialization_options())
    finally:
        await server.shutdown()


@click.command("mcp", cls=Command)
@click.option("--no-reload", "no_reload", is_flag=True, help="Don't watch the files for changes.")
@ROOT_OPTION
def mcp(no_reload: bool, root: Path | None) -> None:
    """The yard's flows as MCP tools on stdin/stdout (for desktop MCP clients)."""
    raise SystemExit(mcp_command(root_of(root), not no_reload))
