"""`blockyard gc`: delete the ended runs the yard's `retention:` no longer keeps, then give the space
back (engine/state/retention.py; docs/cli.md). Imports no LangGraph: it works on the tables alone."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, root_of, state_location
from engine.core.errors import UsageError, ValidationFailed
from engine.definitions.project import CONFIG_FILE, load_project
from engine.spec.common import MAX_DURATION, duration_seconds
from engine.state import retention
from engine.validate.semantic.config import check_config


def _older_than(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        seconds = duration_seconds(text)
    except ValueError:
        raise UsageError(
            f"gc: --older-than '{text}' is not a duration such as 30d, 12h or 90m"
        ) from None
    if seconds > MAX_DURATION:
        raise UsageError(f"gc: --older-than '{text}' is longer than ten years")
    return text


def gc_command(
    root: Path, older_than: str | None, dry_run: bool, vacuum: bool | None, as_json: bool
) -> int:
    age = _older_than(older_than)
    project = load_project(root)
    # a broken blockyard.yaml could mean another policy than the one written: delete nothing on it
    broken = [
        d
        for d in [*project.diagnostics, *check_config(project)]
        if d.file == CONFIG_FILE and d.severity == "error"
    ]
    if broken:
        raise ValidationFailed(sorted(set(broken)))
    location = state_location(root)
    policy = retention.Policy.of(project.config.retention, age)
    if policy.empty:
        message = (
            "gc: nothing to collect: blockyard.yaml sets no `retention:` (or pass --older-than)"
        )
        if as_json:
            sys.stdout.write(json.dumps({"dry_run": dry_run, "counts": {}, "note": message}) + "\n")
        else:
            click.echo(message, err=True)
        return 0
    report = retention.collect(
        location, policy, datetime.now().astimezone(), dry_run=dry_run, vacuum=vacuum
    )
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "dry_run": report.dry_run,
                    "counts": report.counts,
                    "bytes_before": report.bytes_before,
                    "bytes_after": report.bytes_after,
                    "vacuumed": report.vacuumed,
                }
            )
            + "\n"
        )
        return 0
    counts = report.counts
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"gc: {verb} {counts['runs']} run(s) and the traces of {counts['traces']} more "
        f"({counts['events']} trace events, {counts['checkpoints']} checkpoints, {counts['gates']} gates)"
    )
    if not dry_run:
        click.echo(
            f"gc: database {_mib(report.bytes_before)} -> {_mib(report.bytes_after)}"
            + (" (vacuumed)" if report.vacuumed else "")
        )
    return 0


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@click.command("gc")
@click.option(
    "--older-than",
    "older_than",
    metavar="DURATION",
    help="Delete finished runs older than this (e.g. 30d), instead of `retention.runs`.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be deleted; delete nothing.")
@click.option(
    "--vacuum/--no-vacuum",
    default=None,
    help="SQLite: rewrite the file to give freed space back (default: when a tenth of it is free).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def gc(
    older_than: str | None, dry_run: bool, vacuum: bool | None, as_json: bool, root: Path | None
) -> None:
    """Delete ended runs the yard's `retention:` no longer keeps (never waiting or running runs, nor thread turns)."""
    raise SystemExit(gc_command(root_of(root), older_than, dry_run, vacuum, as_json))
