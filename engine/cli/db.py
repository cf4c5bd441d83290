"""`blockyard db status` and `blockyard db copy --to URL`: which state database a yard uses and what
it holds, and moving a yard's state from its SQLite file to Postgres (docs/postgres.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Group, root_of, state_location
from engine.core.errors import UsageError
from engine.core.redaction import mask_url
from engine.state import backends, store
from engine.state.location import Location, check_url


def status_command(root: Path, as_json: bool) -> int:
    location = state_location(root)
    with backends.reading(location) as conn:
        found = backends.status(conn, location)
    if as_json:
        sys.stdout.write(json.dumps(found.as_dict(), ensure_ascii=False, indent=2) + "\n")
        return 0
    lines = [
        f"backend         {found.backend}",
        f"database        {found.location}",
        f"schema version  {found.schema_version}"
        + ("" if found.schema_version else " (no database yet)"),
    ]
    lines += [f"{name:<16}{count}" for name, count in found.counts.items()]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def copy_command(root: Path, to: str, source: Path | None) -> int:
    # LangGraph's checkpointers (both backends) and psycopg: only for this command
    from engine.state.checkpointer import StateDB
    from engine.state.transfer import copy  # (LangGraph, as above)

    url = check_url(to, "--to")
    here = state_location(root)
    path = source if source is not None else here.path
    conn = store.open_existing(path)
    if conn is None:
        raise UsageError(f"db copy: no SQLite state database at {path}")
    try:
        target = StateDB(Location(here.path, url))
        try:
            copied = copy(conn, target)
        finally:
            target.close()
    finally:
        conn.close()
    summary = ", ".join(f"{count} {name}" for name, count in copied.items())
    click.echo(f"copied {path} to {mask_url(url)}: {summary}")
    return 0


@click.group("db", cls=Group)
def db() -> None:
    """The yard's state database: which one, what it holds, moving it to Postgres."""


@db.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def db_status(as_json: bool, root: Path | None) -> None:
    """The backend (sqlite or postgres), the schema version and how much is stored."""
    raise SystemExit(status_command(root_of(root), as_json))


@db.command("copy")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="URL",
    help="The Postgres database: postgresql://user:pw@host/name.",
)
@click.option(
    "--from",
    "source",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The SQLite file to copy (default: the yard's paths.state).",
)
@ROOT_OPTION
def db_copy(to: str, source: Path | None, root: Path | None) -> None:
    """Copy the yard's SQLite state (runs, traces, checkpoints, threads, memory) into an empty Postgres database."""
    raise SystemExit(copy_command(root_of(root), to, source))
