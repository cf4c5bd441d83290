"""`blockyard gates [--expire]`: the approval gates waiting for a decision, and their timeouts.

Listing reads only our tables (no LangGraph). `--expire` decides every gate whose timeout has
passed by its `on_timeout` and continues its run — the same as `blockyard serve` does on its own,
for yards without a server (run it from cron).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from engine.cli.catalog import table
from engine.cli.options import ROOT_OPTION, Command, root_of, state_location
from engine.cli.runs import local_time
from engine.state import backends, gates

MESSAGE_WIDTH = 60


def shorten(text: str, width: int = MESSAGE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def gates_command(root: Path, flow: str | None, expire: bool, as_json: bool) -> int:
    """List the waiting gates, or with `expire` decide those whose timeout has passed."""
    if expire:
        return _expire(root, as_json)
    waiting = []
    with backends.reading(state_location(root)) as conn:
        if conn is not None:
            waiting = gates.waiting(conn, flow=flow)
    if as_json:
        sys.stdout.write(
            json.dumps([gate.as_dict() for gate in waiting], ensure_ascii=False, indent=2) + "\n"
        )
        return 0
    if not waiting:
        sys.stdout.write("no gates waiting\n")
        return 0
    rows = [
        [
            gate.run_id,
            gate.flow,
            gate.gate,
            local_time(gate.created),
            local_time(gate.timeout_at) or "-",
            shorten(gate.message),
        ]
        for gate in waiting
    ]
    sys.stdout.write(table(["RUN", "FLOW", "GATE", "WAITING SINCE", "TIMEOUT AT", "MESSAGE"], rows))
    return 0


def _expire(root: Path, as_json: bool) -> int:
    from engine.runtime.yard import Yard  # LangGraph: only when gates are decided

    with Yard.open(root) as yard:
        expired = yard.expire_gates()
    if as_json:
        sys.stdout.write(
            json.dumps([item.as_dict() for item in expired], ensure_ascii=False, indent=2) + "\n"
        )
        return 0
    if not expired:
        sys.stdout.write("no gate has timed out\n")
    for item in expired:
        error = f": {item.error}" if item.error else ""
        sys.stdout.write(
            f"run {item.run_id}: gate '{item.gate}' timed out -> {item.action}; "
            f"the run is {item.status}{error}\n"
        )
    return 0


# ---- the commands ---------------------------------------------------------------------------------


@click.command("gates", cls=Command)
@click.option("--flow", default=None, help="Only gates of this flow.")
@click.option(
    "--expire",
    is_flag=True,
    help="Decide the gates whose timeout has passed (their on_timeout) "
    "and continue their runs; for cron, when no server runs.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def gates_cli(flow: str | None, expire: bool, as_json: bool, root: Path | None) -> None:
    """List the approval gates waiting for a decision."""
    raise SystemExit(gates_command(root_of(root), flow, expire, as_json))
