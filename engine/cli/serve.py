"""`blockyard serve`, `blockyard watch` and `blockyard schedules`.

The server's parts (FastAPI, uvicorn, the runtime with LangGraph), the file watcher and croniter
are imported when these commands run, not by the CLI's light commands (`blockyard validate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from zoneinfo import ZoneInfo

import click

from engine.cli import startup
from engine.cli.options import ROOT_OPTION, Command, Seconds, root_of
from engine.core.errors import UsageError
from engine.definitions.project import load_project
from engine.spec import ConfigSpec
from engine.spec.flow import ScheduleSpec
from engine.state import backends
from engine.state.location import of_yard
from engine.validate.report import REPORTERS, Report
from engine.validate.semantic import check_project

if TYPE_CHECKING:  # the server's package: imported by the schedules command only, when it runs
    from engine.serve.schedules import ScheduleState, ScheduleStore

KEEP_ALIVE = 75  # seconds (see `serve`)


def serve_command(root: Path, host: str | None, port: int | None, watch: bool, grace: float) -> int:
    """Serve the yard at `root` until Ctrl-C / SIGTERM; host and port default to blockyard.yaml's server."""
    # the server's parts (FastAPI, uvicorn, the runtime), imported only when the server starts, and the yard
    # and app: loaded without the collector's scans, then frozen (engine/cli/startup.py, `serving`)
    with startup.serving():
        import uvicorn

        from engine.serve import logs  # (see above)
        from engine.serve.app import create_app  # (see above)
        from engine.serve.auth import server_token  # (see above)
        from engine.serve.server import Server, Settings  # (see above)

        if not root.is_dir():
            raise UsageError(f"{root}: no such folder (give the yard with --root)")
        config = _config(root)
        # a damaged state database is refused before binding the port: uvicorn would report a failure
        # of the startup as a traceback and exit 3, which reads as "paused"
        backends.check(of_yard(root, config.paths.state, config.database))
        logs.configure()
        server = Server(Settings(root=root, watch=watch, grace=grace, replica=True))
        catalog = server.load()
        host = host or config.server.host
        port = port or config.server.port
        server.settings.host, server.settings.port = host, port
        server.settings.token = server_token(host)
        if not catalog.flows and not catalog.diagnostics:
            logs.get_logger().warning(
                "no_flows", extra=logs.fields(root=str(root), hint="add flows/*.yaml")
            )
        app = create_app(server)
    uv = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(grace) + 5,
        server_header=False,
        # an idle keep-alive connection is closed after KEEP_ALIVE seconds, longer than clients and
        # proxies keep theirs (httpx and Node 5 s, aiohttp 15 s, a cloud load balancer 60 s): with
        # uvicorn's 5 s, a client reusing a connection as the server closed it lost the request
        # (docs/serve.md, "Connections")
        timeout_keep_alive=KEEP_ALIVE,
    )
    logs.get_logger().info("listening", extra=logs.fields(url=f"http://{_url_host(host)}:{port}/"))
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal: for a server
    # that is the normal way to stop, so both end here with exit 0.
    previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        uvicorn.Server(uv).run()
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


class _Stopped(Exception):
    """SIGTERM, after the graceful shutdown."""


def _stopped(_signum: int, _frame: object) -> None:
    raise _Stopped


def _config(root: Path) -> ConfigSpec:
    return load_project(root).config


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def watch_command(root: Path, fmt: str = "text", out: TextIO | None = None) -> int:
    """Validate now and after every save until Ctrl-C; prints each report (exit 0 on Ctrl-C)."""
    from engine.serve.watcher import YardWatcher  # watchfiles: see the module's docstring

    out = out or sys.stdout
    if not root.is_dir():
        raise UsageError(f"{root}: no such folder")

    async def loop() -> None:
        watcher = YardWatcher(root)
        batches = watcher.batches(asyncio.Event())
        upcoming = asyncio.ensure_future(anext(batches))
        await watcher.ready.wait()  # watching before the first report: no save falls in between
        _report(root, fmt, out, None)
        while True:
            _report(root, fmt, out, await upcoming)
            upcoming = asyncio.ensure_future(anext(batches))

    print(f"watching {root} for changes (Ctrl-C to stop)", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(loop())
    return 0


def _report(root: Path, fmt: str, out: TextIO, changed: set[Path] | None) -> None:
    began = time.perf_counter()
    project = load_project(root)
    diagnostics = list(project.diagnostics)
    if project.ok:
        diagnostics.extend(check_project(project))
    report = Report(sorted(set(diagnostics)), len(project.files))
    if fmt == "json":
        print(
            json.dumps(
                {
                    "time": _now(),
                    "changed": sorted(_rel(p, root) for p in changed or ()),
                    "ok": report.ok,
                    "diagnostics": [d.as_dict() for d in report.diagnostics],
                }
            ),
            file=out,
            flush=True,
        )
        return
    what = ", ".join(sorted(_rel(p, root) for p in changed)) if changed else "start"
    print(f"--- {time.strftime('%H:%M:%S')} {what}", file=out)
    REPORTERS["text"](report, out, out)
    print(f"    ({(time.perf_counter() - began) * 1000:.0f} ms)", file=out, flush=True)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def schedules_command(root: Path, as_json: bool, out: TextIO | None = None) -> int:
    """Print every scheduled flow with its next fire time; exit 1 when a schedule is unusable."""
    # the server's package and croniter (see engine/spec/cron.py's docstring): for this command only
    from engine.serve.schedules import ScheduleStore
    from engine.spec.cron import next_fire, schedule_problem

    out = out or sys.stdout
    project = load_project(root)
    store = ScheduleStore(of_yard(root, project.config.paths.state, project.config.database))
    states = store.load()
    now = datetime.now(UTC)
    rows: list[dict[str, object]] = []
    for name, definition in sorted(project.flows.items()):
        schedule = definition.spec.schedule
        if schedule is None:
            continue
        problem = schedule_problem(schedule)
        state = states.get(name)
        upcoming = None if problem else next_fire(schedule, max(now, state.since) if state else now)
        rows.append(
            _row(name, schedule, state, upcoming, problem, file=definition.display, origin="yaml")
        )
    rows += _api_crons(store, states, now)
    if as_json:
        print(json.dumps(rows, indent=2), file=out)
    elif not rows:
        print("no scheduled flows", file=out)
    else:
        _table(rows, out)
    for diagnostic in project.diagnostics:
        if diagnostic.severity == "error":
            print(f"warning: {diagnostic.format()}", file=sys.stderr)
    return 1 if any(row["problem"] for row in rows) else 0


def _api_crons(
    store: ScheduleStore, states: dict[str, ScheduleState], now: datetime
) -> list[dict[str, object]]:
    """The crons made over the LangGraph API (docs/langgraph-api.md, "Crons"), as `schedules_command` lists
    them: no file of the yard says them, so they are the database's."""
    # the server's package and croniter, as in schedules_command
    from engine.spec.cron import next_fire, schedule_problem

    rows: list[dict[str, object]] = []
    for cron in store.crons():
        schedule = ScheduleSpec(cron=cron.cron, timezone=cron.timezone)
        problem = schedule_problem(schedule)
        state = states.get(cron.key)
        ended = cron.end_time is not None and now > datetime.fromisoformat(cron.end_time)
        upcoming = (
            None
            if problem or ended or not cron.enabled
            else next_fire(schedule, max(now, state.since) if state else now)
        )
        rows.append(
            _row(
                cron.flow,
                schedule,
                state,
                upcoming,
                problem,
                file=None,
                origin="api",
                cron_id=cron.id,
                thread_id=cron.thread_id,
                enabled=cron.enabled,
                end_time=cron.end_time,
            )
        )
    return rows


def _row(
    flow: str,
    schedule: ScheduleSpec,
    state: ScheduleState | None,
    upcoming: datetime | None,
    problem: str | None,
    **more: object,
) -> dict[str, object]:
    """One schedule as `blockyard schedules --json` shows it."""
    return {
        "flow": flow,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "misfire": schedule.misfire,
        "next_fire": upcoming.isoformat() if upcoming else None,
        "last_fire": state.last_fire.isoformat() if state and state.last_fire else None,
        "last_run": state.last_run if state else None,
        "problem": problem,
        **more,
    }


def _table(rows: list[dict[str, object]], out: TextIO) -> None:
    header = ("FLOW", "CRON", "TIMEZONE", "MISFIRE", "NEXT FIRE", "LAST FIRE", "ORIGIN")
    lines = [header]
    for row in rows:
        nxt = (
            _local(row["next_fire"], row["timezone"])
            if row["next_fire"]
            else f"error: {row['problem']}"
            if row["problem"]
            else "-"
        )
        last = _local(row["last_fire"], row["timezone"]) if row["last_fire"] else "-"
        origin = f"api {row['cron_id']}" if row["origin"] == "api" else str(row["file"])
        lines.append(
            (
                str(row["flow"]),
                str(row["cron"]),
                str(row["timezone"]),
                str(row["misfire"]),
                nxt,
                last,
                origin,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        print(
            "  ".join(
                cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=False)
            ).rstrip()
            + "  "
            + line[-1],
            file=out,
        )


def _local(iso: object, zone: object) -> str:
    when = datetime.fromisoformat(str(iso))
    with contextlib.suppress(KeyError, ValueError):
        when = when.astimezone(ZoneInfo(str(zone)))
    return when.strftime("%Y-%m-%d %H:%M %Z")


# ---- the commands ---------------------------------------------------------------------------------


@click.command("serve", cls=Command)
@click.option(
    "--host",
    default=None,
    help="Address to bind (default: blockyard.yaml server.host, 127.0.0.1); "
    "any non-loopback address needs BLOCKYARD_TOKEN.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port to bind (default: blockyard.yaml server.port, 8000).",
)
@click.option("--no-reload", "no_reload", is_flag=True, help="Don't watch the files for changes.")
@click.option(
    "--grace",
    type=Seconds(0, 86_400),
    default=30.0,
    show_default=True,
    help="Seconds running runs get to finish at shutdown before they are interrupted.",
)
@ROOT_OPTION
def serve(
    host: str | None, port: int | None, no_reload: bool, grace: float, root: Path | None
) -> None:
    """HTTP API, live events, web page, hot reload and schedules."""
    raise SystemExit(serve_command(root_of(root), host, port, not no_reload, grace))


@click.command("watch", cls=Command)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: a report per save; json: one JSON object per save.",
)
@ROOT_OPTION
def watch(fmt: str, root: Path | None) -> None:
    """Re-validate on every save and print the problems (Ctrl-C to stop)."""
    raise SystemExit(watch_command(root_of(root), fmt))


@click.command("schedules", cls=Command)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def schedules(as_json: bool, root: Path | None) -> None:
    """Print the scheduled flows and their next fire times."""
    raise SystemExit(schedules_command(root_of(root), as_json))
