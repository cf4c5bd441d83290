"""`blockyard diff [BASE [HEAD]]`: what a change of the yard does, as kubectl diff answers it
(exit 0 no difference, 1 differences, 2 an error). Imports no LangGraph (engine/review/)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command, root_of, state_location
from engine.core.errors import UsageError
from engine.review.command import diff_yard
from engine.review.inflight import LocalState, StateSource
from engine.review.render import FORMATS, render


@click.command("diff", cls=Command)
@click.argument("base", required=False)
@click.argument("head", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text, json, or markdown (a pull-request comment with a Mermaid graph of each changed flow).",
)
@click.option(
    "--state",
    "with_state",
    is_flag=True,
    help="Also list what the change means for paused runs, schedules and threads of the yard's state "
    "database (paths.state, or the Postgres database of `database:`).",
)
@click.option(
    "--server",
    metavar="URL",
    default=None,
    help="With --state (implied): read the paused runs, schedules and threads from the running "
    "`blockyard serve` at URL instead of the local state database.",
)
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    help="The server's bearer token for --server (default: $BLOCKYARD_TOKEN).",
)
@ROOT_OPTION
def diff(
    base: str | None,
    head: str | None,
    fmt: str,
    with_state: bool,
    server: str | None,
    token: str | None,
    root: Path | None,
) -> None:
    """Compare two revisions of the yard: flows, steps, edges, blocks' contracts and prompts.

    BASE and HEAD are git revisions or folders; HEAD defaults to the working tree and BASE to the
    merge base with the default branch. Exit 0: no difference, 1: differences, 2: an error.
    """
    yard = root_of(root)
    if token is not None and server is None:
        raise UsageError("--token goes with --server URL")
    state: StateSource | None = None
    if server is not None:
        from engine.cli.serverstate import ServerState  # httpx loads for --server only

        state = ServerState(server, token)
    elif with_state:
        state = LocalState(state_location(yard))
    outcome = diff_yard(yard, base, head, draw=fmt == "markdown", state=state)
    for warning in outcome.warnings:
        click.echo(f"warning: {warning}", err=True)
    sys.stdout.write(render(outcome.diff, fmt))
    raise SystemExit(1 if outcome.diff.changed else 0)
