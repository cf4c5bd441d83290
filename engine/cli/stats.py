"""`blockyard stats [FLOW] [--since 7d] [--json]`: per flow and version over a window — runs, failures,
duration percentiles, tokens and cost per run, the total cost (engine/state/stats.py, shared with
`GET /stats`). Reads the runs table only; imports no LangGraph, so it starts fast."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from engine.cli.catalog import table
from engine.cli.options import ROOT_OPTION, Command, root_of, state_location
from engine.cli.progress import format_duration
from engine.cli.runs import compact, local_time
from engine.state import backends, stats
from engine.state.stats import Report, Row


def stats_command(root: Path, flow: str | None, since: str | None, as_json: bool) -> int:
    chosen = stats.window(since)  # a bad --since is a usage error before the database is opened
    with backends.reading(state_location(root)) as conn:
        found = stats.report(conn, chosen, flow) if conn is not None else Report(chosen, flow, [])
    if as_json:
        sys.stdout.write(json.dumps(found.as_dict(), ensure_ascii=False, indent=2) + "\n")
        return 0
    sys.stdout.write(render(found))
    return 0


def render(found: Report) -> str:
    """The table: a row per flow version, and a flow's `all` row when it ran in several versions."""
    what = f"runs of {found.flow}" if found.flow else "runs"
    head = f"{what} since {local_time(found.window.since)} ({found.window.text})\n"
    if not found.versions:
        return head + "no runs in this window\n"
    rows: list[list[str]] = []
    versions: dict[str, int] = {}
    for row in found.versions:
        versions[row.flow] = versions.get(row.flow, 0) + 1
    wholes = {row.flow: row for row in found.flows()}
    for index, row in enumerate(found.versions):
        rows.append(_cells(row))
        last_of_flow = (
            index + 1 == len(found.versions) or found.versions[index + 1].flow != row.flow
        )
        if last_of_flow and versions[row.flow] > 1:
            rows.append(_cells(wholes[row.flow]))
    header = [
        "FLOW",
        "VERSION",
        "RUNS",
        "FAILED",
        "P50",
        "P95",
        "TOKENS/RUN",
        "COST/RUN",
        "TOTAL COST",
    ]
    return head + table(header, rows)


def _cells(row: Row) -> list[str]:
    rate = row.failure_rate
    failed = f"{row.failed} ({rate:.0%})" if rate is not None else str(row.failed)
    p50, p95 = stats.percentile(row.durations, 0.5), stats.percentile(row.durations, 0.95)
    tokens = row.mean_tokens
    return [
        row.flow,
        "all" if row.version is None else str(row.version),
        str(row.runs),
        failed,
        format_duration(p50) or "-",
        format_duration(p95) or "-",
        compact(round(tokens)) if tokens is not None else "-",
        row.mean_cost_text(),
        row.cost_text(),
    ]


@click.command("stats", cls=Command)
@click.argument("flow", required=False)
@click.option(
    "--since",
    default=stats.DEFAULT_SINCE,
    show_default=True,
    metavar="DURATION|DATE",
    help="The window: runs started this long ago or later (7d, 12h, 90m), or since a date (2026-11-01).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def stats_cli(flow: str | None, since: str, as_json: bool, root: Path | None) -> None:
    """Per flow and version: runs, failures, p50/p95 duration, tokens and cost per run, total cost."""
    raise SystemExit(stats_command(root_of(root), flow, since, as_json))
