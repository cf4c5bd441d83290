"""`blockyard threads` and `blockyard threads show ID`: conversation threads, for people.

Reads only our tables (no LangGraph): the conversation from the `messages` table (the store for
people, engine/state/messages.py), each reply with the run that made it; turns that did not
finish (failed, waiting, running) from the runs table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from engine.cli.catalog import table
from engine.cli.gates import shorten
from engine.cli.options import LIMIT, ROOT_OPTION, Group, root_of, state_location
from engine.cli.runs import local_time
from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError
from engine.core.events import RunStatus
from engine.core.values import JsonDict
from engine.state import backends, messages, store, thread_inputs, threads
from engine.state.database import Connection
from engine.state.store import RunRecord, effective_status


def threads_command(root: Path, flow: str | None, limit: int, as_json: bool) -> int:
    """The threads, most recently active first."""
    found: list[threads.Thread] = []
    statuses: dict[str, str] = {}
    with backends.reading(state_location(root)) as conn:
        if conn is not None:
            found = threads.list_threads(conn, flow=flow, limit=limit)
            statuses = {t.id: _status(conn, t.last_run) for t in found}
    if as_json:
        body = [{**t.as_dict(), "status": statuses.get(t.id)} for t in found]
        sys.stdout.write(json.dumps(body, ensure_ascii=False, indent=2) + "\n")
        return 0
    if not found:
        sys.stdout.write(
            "no threads match\n"
            if flow
            else "no threads yet (start one with `blockyard run FLOW --thread ID`)\n"
        )
        return 0
    rows = [
        [
            t.id,
            t.flow,
            str(t.turns),
            local_time(t.updated),
            statuses.get(t.id) or "",
            shorten(t.label),
        ]
        for t in found
    ]
    sys.stdout.write(table(["THREAD", "FLOW", "TURNS", "UPDATED", "LAST TURN", "TITLE"], rows))
    return 0


def _status(conn: Connection, run_id: str | None) -> str:
    run = store.get_run(conn, run_id) if run_id else None
    return effective_status(run) if run is not None else ""


def thread_show_command(root: Path, thread_id: str, as_json: bool) -> int:
    """One thread: its turns in order, each with what was asked and what came back."""
    with backends.reading(state_location(root)) as conn:
        if conn is None:
            raise UsageError(f"unknown thread '{thread_id}' (no threads yet)")
        thread = threads.get_thread(conn, thread_id)
        if thread is None:
            raise UsageError(
                f"unknown thread '{thread_id}'{did_you_mean(thread_id, threads.thread_ids(conn))}"
            )
        turns = [
            store.get_run(conn, row[0])
            for row in conn.execute(
                f"SELECT id FROM runs WHERE thread_id = ? ORDER BY {store.OLDEST_FIRST}",
                (thread_id,),
            )
        ]
        said = messages.history(conn, thread_id, limit=messages.MAX_PAGE, newest=True)
        written = thread_inputs.read(conn, thread_id)
    runs = [run for run in turns if run is not None]
    if as_json:
        body = {
            "thread": thread.as_dict(),
            "messages": [m.as_dict() for m in said],
            "turns": [_turn(run) for run in runs],
            "inputs": written.as_dict(),
        }
        sys.stdout.write(json.dumps(body, ensure_ascii=False, indent=2, default=str) + "\n")
        return 0
    lines = [
        f"thread    {thread.id}",
        f"flow      {thread.flow}",
        f"name      {thread.label}",
        f"turns     {thread.turns}",
        f"updated   {local_time(thread.updated)}",
        *_written(written),
        "",
    ]
    replied = {m.run_id for m in said}
    if said or not runs:
        by_id = {run.id: run for run in runs}
        for message in said:
            if message.role == "user":
                run = by_id.get(message.run_id)
                lines.append(
                    f"[{local_time(run.started if run else message.created)}] run {message.run_id}"
                )
            lines.append(_indent("> " if message.role == "user" else "< ", message.content))
        runs = [
            run
            for run in runs
            if run.id not in replied
            and run.started
            and (not said or run.started >= said[0].created)
        ]
    for run in runs:  # turns that did not finish (or a thread older than the messages table)
        turn = _turn(run)
        lines.append(f"[{local_time(run.started)}] run {run.id}")
        lines.append(_indent("> ", turn["said"]))
        if turn["reply"] is not None:
            lines.append(_indent("< ", turn["reply"]))
        else:
            lines.append(f"  ({turn['status']}" + (f": {run.error}" if run.error else "") + ")")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _written(written: thread_inputs.Written) -> list[str]:
    """The inputs a client wrote to the thread, which its next turns take, and when and by what the
    last write was made (`--json`: every write)."""
    if not written.writes:
        return []
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in written.values.items()
    )
    last = written.writes[-1]
    return [
        f"inputs    {shown or '(none)'}  (written {local_time(str(last.get('time')))} by "
        f"{last.get('by')}; {len(written.writes)} write{'s' if len(written.writes) != 1 else ''})"
    ]


def _turn(run: RunRecord) -> JsonDict:
    status = effective_status(run)
    reply = threads.reply_text(run.outputs) if status == RunStatus.FINISHED else None
    return {
        "run_id": run.id,
        "status": status,
        "said": threads.turn_text(run.inputs),
        "reply": reply,
        "started": run.started,
    }


def _indent(mark: str, text: str) -> str:
    return "\n".join(f"  {mark}{line}" for line in (text.splitlines() or [""]))


# ---- the commands ---------------------------------------------------------------------------------


@click.group("threads", cls=Group, invoke_without_command=True)
@click.option("--flow", default=None, help="Only threads of this flow.")
@click.option(
    "--limit", type=LIMIT, default=50, show_default=True, help="How many threads to show."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
@click.pass_context
def threads_cli(
    ctx: click.Context, flow: str | None, limit: int, as_json: bool, root: Path | None
) -> None:
    """List conversation threads (`blockyard run FLOW --thread ID`), most recent first."""
    if ctx.invoked_subcommand is None:
        raise SystemExit(threads_command(root_of(root), flow, limit, as_json))


@threads_cli.command("show")
@click.argument("thread_id")
@click.option("--json", "as_json", is_flag=True, help="Print the thread as JSON.")
@ROOT_OPTION
def threads_show(thread_id: str, as_json: bool, root: Path | None) -> None:
    """Show one thread: each turn, what was asked and what came back."""
    raise SystemExit(thread_show_command(root_of(root), thread_id, as_json))
