"""`blockyard runs` and `blockyard runs show`: what the runs table and the trace say, for people.

Reads only; imports no LangGraph (it only looks at our tables), so it starts fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import click
import yaml

from engine.cli.options import LIMIT, ROOT_OPTION, Group, root_of, state_location
from engine.cli.progress import format_duration
from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError
from engine.core.events import (
    APPROVAL_REQUIRED,
    MODEL_CALL,
    STEP_FAILED,
    STEP_FINISHED,
    STEP_STARTED,
    TOOL_CALL,
    Event,
    RunStatus,
    parse_time,
)
from engine.core.usage import SPEND_KEYS, Spend
from engine.core.values import JsonDict
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from engine.spec.durability import NO_CHECKPOINTS
from engine.state import backends, store, written
from engine.state import gates as gate_rows
from engine.state.database import Connection
from engine.state.stats import usage_dict
from engine.state.store import STATUSES, RunRecord, effective_status


def _reading(root: Path) -> AbstractContextManager[Connection | None]:
    return backends.reading(state_location(root))


def local_time(iso: str | None) -> str:
    """An ISO-8601 UTC time as local 'YYYY-MM-DD HH:MM:SS'."""
    if not iso:
        return ""
    return parse_time(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _duration(run: RunRecord, status: RunStatus) -> float | None:
    if status == RunStatus.RUNNING and run.started:
        return (
            run.duration
            + (
                datetime.now(parse_time(run.started).tzinfo) - parse_time(run.started)
            ).total_seconds()
        )
    return run.duration if run.started else None


def _gate_name(gate: Event) -> str:
    """A waiting gate as people name it: its step, with [index] for a map or foreach item."""
    value = gate.data.get("value")
    name = value.get("gate") if isinstance(value, dict) else None
    return str(name or gate.step)


def _detail(run: RunRecord, status: RunStatus, gates: list[Event] | None = None) -> str:
    if status == RunStatus.WAITING and gates:
        return "gate " + ", ".join(f"'{_gate_name(gate)}'" for gate in gates)
    if status == RunStatus.FAILED:
        return (f"step '{run.error_step}': " if run.error_step else "") + (run.error or "")
    if status == RunStatus.INTERRUPTED:
        if run.error_step:
            return f"at step '{run.error_step}'"
        return "process gone" if run.status == RunStatus.RUNNING else ""
    return ""


WORKSPACES = "workspaces"  # next to the state database
DETAIL_WIDTH = 80  # `runs show` has the whole message


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def compact(count: int) -> str:
    """A token count in a few characters: 950, 12.3k, 4.1M, 2B."""
    for size, unit in ((10**9, "B"), (10**6, "M"), (10**3, "k")):
        if count >= size:
            shown = f"{count / size:.1f}".removesuffix(".0")
            return f"{shown}{unit}"
    return str(count)


def spend_of(run: RunRecord) -> Spend:
    """The run's usage totals, from its row (over all its executions)."""
    return Spend(**{key: getattr(run, key) for key in SPEND_KEYS})


def _usage_cells(run: RunRecord) -> tuple[str, str]:
    """TOKENS and COST of the table: `-` for a run without model calls; an unknown price is `unknown`, never $0."""
    spend = spend_of(run)
    return (compact(spend.tokens) if spend.model_calls else "-"), spend.cost_text()


def print_runs(root: Path, flow: str | None, status: str | None, limit: int) -> int:
    """The table of runs, newest first."""
    if status is not None and status not in STATUSES:
        raise UsageError(
            f"unknown status '{status}'{did_you_mean(status, STATUSES)}; "
            f"use one of {', '.join(STATUSES)}"
        )
    with _reading(root) as conn:
        if conn is None:
            sys.stdout.write("no runs yet\n")
            return 0
        # a dead process's run is stored as running but shown as interrupted: filter after the fact
        wanted = (
            [RunStatus.INTERRUPTED, RunStatus.RUNNING]
            if status == RunStatus.INTERRUPTED
            else [status]
            if status
            else None
        )
        rows = store.list_runs(conn, flow=flow, statuses=wanted, limit=None if status else limit)
        table: list[tuple[str, ...]] = []
        for run in rows:
            shown = effective_status(run)
            if status is not None and shown != status:
                continue
            gates = store.waiting_gates(conn, run.id) if shown == RunStatus.WAITING else None
            table.append(
                (
                    run.id,
                    f"{run.flow}@{run.version}",
                    shown,
                    local_time(run.started),
                    format_duration(_duration(run, shown)),
                    *_usage_cells(run),
                    _shorten(_detail(run, shown, gates), DETAIL_WIDTH),
                )
            )
            if len(table) >= limit:
                break
    if not table:
        sys.stdout.write("no runs match\n" if flow or status else "no runs yet\n")
        return 0
    sys.stdout.write(
        _format_table(
            ("ID", "FLOW", "STATUS", "STARTED", "DURATION", "TOKENS", "COST", "DETAIL"), table
        )
    )
    return 0


def _format_table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    rows = [header, *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines) + "\n"


class ToolError(TypedDict):
    """A tool call of an agent step that failed (`index`: the map item or foreach iteration, if any)."""

    tool: str | None
    error: str | None
    index: NotRequired[int]


class StepRow(TypedDict):
    """One step of `blockyard runs show` (and its `--json` "steps")."""

    step: str
    status: str
    attempts: int
    finished: int
    failed: int
    duration_ms: float
    error: str | None
    tool_errors: list[ToolError]
    usage: NotRequired[JsonDict]  # its model calls' totals (`add_usage`)
    items: NotRequired[int]  # the map items or foreach iterations it ran


def _row(step: str, status: str) -> StepRow:
    return {
        "step": step,
        "status": status,
        "attempts": 0,
        "finished": 0,
        "failed": 0,
        "duration_ms": 0.0,
        "error": None,
        "tool_errors": [],
    }


def step_summary(events: list[Event], run_status: RunStatus) -> list[StepRow]:
    """Per step, in order of first start: status, attempts, total time, last error, and the tool
    calls of an agent step that failed (`tool_errors`: tool, error, and the item's index if any) —
    the agent may have recovered and the run finished, but the failure is part of the record."""
    steps: dict[str, StepRow] = {}
    open_: dict[tuple[str, Any], Event] = {}
    # steps the run waited in for a person (a gate of a subflow, an agent's tool call): started again
    # when it resumes, they go on rather than try again
    waited: set[tuple[str, Any]] = set()
    for event in events:
        if event.type == APPROVAL_REQUIRED:
            waited.update(open_)
            continue
        if event.step is None or event.type not in (
            STEP_STARTED,
            STEP_FINISHED,
            STEP_FAILED,
            TOOL_CALL,
        ):
            continue
        entry = steps.setdefault(event.step, _row(event.step, RunStatus.RUNNING))
        if event.type == TOOL_CALL:
            if event.data.get("status") == "error":
                failure: ToolError = {
                    "tool": event.data.get("tool"),
                    "error": event.data.get("error"),
                }
                if event.data.get("index") is not None:
                    failure["index"] = event.data["index"]
                entry["tool_errors"].append(failure)
            continue
        key = (event.step, event.data.get("index"))
        if event.type == STEP_STARTED:
            if key in waited:
                waited.discard(key)
            else:
                entry["attempts"] += 1
            open_[key] = event
            continue
        began = open_.pop(key, None)
        took = event.data.get("duration_ms")
        if not isinstance(took, int | float) and began is not None:
            took = (parse_time(event.time) - parse_time(began.time)).total_seconds() * 1000
        entry["duration_ms"] += float(took or 0.0)
        if event.type == STEP_FAILED:
            entry["failed"] += 1
            entry["error"] = event.data.get("error") or event.data.get("reason")
        else:
            entry["finished"] += 1
    running = {step for step, _index in open_}
    for entry in steps.values():
        if entry["step"] in running:
            entry["status"] = (
                RunStatus.RUNNING if run_status == RunStatus.RUNNING else RunStatus.INTERRUPTED
            )
        elif entry["failed"] and not entry["finished"]:
            entry["status"] = RunStatus.FAILED
        else:
            entry["status"] = RunStatus.FINISHED if entry["finished"] else RunStatus.FAILED
        entry["duration_ms"] = round(entry["duration_ms"], 1)
    return list(steps.values())


OUTSIDE_STEPS = (
    "(no step)"  # how `runs show` names model calls made outside any step (a thread's naming)
)


def step_usage(events: list[Event]) -> dict[str | None, tuple[Spend, int]]:
    """Per step label, what its model_call events spent and how many map items or foreach iterations
    it ran (distinct `index` of its events; 0 for a plain step). Steps without model calls are absent."""
    spent: dict[str | None, Spend] = {}
    items: dict[str | None, set[Any]] = {}
    for event in events:
        index = event.data.get("index")
        if index is not None:
            items.setdefault(event.step, set()).add(index)
        if event.type == MODEL_CALL:
            spent.setdefault(event.step, Spend()).add(event.data)
    return {step: (spend, len(items.get(step, ()))) for step, spend in spent.items()}


def add_usage(steps: list[StepRow], events: list[Event]) -> JsonDict | None:
    """Put each step's `usage` (engine/state/stats.py, `usage_dict`) and `items` into `steps`; the usage
    of model calls made outside any step is returned (None without any)."""
    used = step_usage(events)
    by_label = {entry["step"]: entry for entry in steps}
    for label in used:
        if label is not None and label not in by_label:  # a step whose only events are model calls
            by_label[label] = _row(label, "")
            steps.append(by_label[label])
    for label, entry in by_label.items():
        spend, items = used.get(label, (Spend(), 0))
        entry["usage"] = usage_dict(spend)
        entry["items"] = items
    outside = used.get(None)
    return usage_dict(outside[0]) if outside is not None else None


def usage_text(spend: Spend) -> str:
    """A run's totals in one line: calls, tokens (with cached and reasoning ones when reported), cost."""
    if not spend.model_calls:
        return "no model calls"
    calls = f"{spend.model_calls} model call{'s' if spend.model_calls > 1 else ''}"
    parts = [
        f"{name} {count:,}"
        for name, count in (("cached", spend.cached_tokens), ("reasoning", spend.reasoning_tokens))
        if count
    ]
    extra = f" ({', '.join(parts)})" if parts else ""
    return (
        f"{calls}, {spend.input_tokens:,} in / {spend.output_tokens:,} out tokens{extra}, "
        f"cost {spend.cost_text()}"
    )


def definition_status(root: Path, run: RunRecord) -> JsonDict:
    """The pinned definition versus the files now: same, differ, missing (flow gone) or unknown."""
    info: JsonDict = {"flow": run.flow, "version": run.version, "digest": run.digest}
    try:
        bundle = make_bundle(load_project(root), run.flow)
    except UsageError:
        info["files"] = "missing"
        return info
    except Exception as exc:  # a broken file must not stop us from showing the run
        info["files"] = "unknown"
        info["reason"] = str(exc)
        return info
    info["files"] = "same" if bundle.digest == run.digest else "differ"
    info["current_version"] = bundle.version
    info["current_digest"] = bundle.digest
    return info


def print_run(root: Path, run_id: str, as_json: bool) -> int:
    """One run: inputs, outputs, steps, error, pinned definition."""
    with _reading(root) as conn:
        if conn is None:
            raise UsageError(f"unknown run '{run_id}' (no runs yet)")
        run = store.get_run(conn, run_id)
        if run is None:
            raise UsageError(f"unknown run '{run_id}'{did_you_mean(run_id, store.run_ids(conn))}")
        events = store.load_events(conn, run_id)
        status = effective_status(run)
        gates = store.waiting_gates(conn, run_id) if status == RunStatus.WAITING else []
        decided = [
            gate for gate in gate_rows.of_run(conn, run_id) if gate.status != gate_rows.WAITING
        ]
        folder = written.output_dir_of(conn, run_id)
    steps = step_summary(events, status)
    outside = add_usage(steps, events)
    definition = definition_status(root, run)
    wrote = {"folder": folder, "files": written.files_written(events)}
    if as_json:
        body = {
            "run": {
                **run.as_dict(),
                "status": status,
                "stored_status": run.status,
                "durability": run.mode,
            },
            "usage": usage_dict(spend_of(run)),
            "steps": steps,
            "outside_steps": outside,
            "waiting": [gate.as_dict() for gate in gates],
            "decisions": [gate.as_dict() for gate in decided],
            "definition": definition,
            "written": wrote,
            "events": [event.as_dict() for event in events],
        }
        sys.stdout.write(json.dumps(body, ensure_ascii=False, indent=2, default=str) + "\n")
        return 0
    sys.stdout.write(_show_text(run, status, steps, definition, gates, decided, wrote, outside))
    return 0


def _show_text(
    run: RunRecord,
    status: RunStatus,
    steps: list[StepRow],
    definition: JsonDict,
    gates: list[Event],
    decided: list[gate_rows.Gate],
    wrote: JsonDict | None = None,
    outside: JsonDict | None = None,
) -> str:
    lines = [
        f"run       {run.id}",
        f"flow      {run.flow}@{run.version}  (definition {run.digest})",
    ]
    lines += _definition_lines(run, definition)
    detail = _detail(run, status, gates)
    lines.append(f"status    {status}" + (f" ({detail})" if detail else ""))
    kept = " (no checkpoints: cannot be resumed)" if run.mode in NO_CHECKPOINTS else ""
    lines.append(f"durability {run.mode}{kept}")
    for gate in gates:
        value = gate.data.get("value")
        message = value.get("message") if isinstance(value, dict) else value
        lines.append(f"waiting   gate '{_gate_name(gate)}'" + (f": {message}" if message else ""))
    if status == RunStatus.FAILED and run.error:
        lines.append(f"error     {run.error}")
    lines.append(f"started   {local_time(run.started)}")
    if run.finished:
        lines.append(f"finished  {local_time(run.finished)}")
    lines.append(f"duration  {format_duration(_duration(run, status))}")
    lines.append(f"usage     {usage_text(spend_of(run))}")
    lines.append("inputs" + _yaml_block(run.inputs))
    if run.outputs is not None:
        lines.append("outputs" + _yaml_block(run.outputs))
    lines += _step_lines(steps, outside)
    lines += _written_lines(run, wrote)
    lines += _decided_lines(decided)
    lines += _next_command_lines(run, status, gates)
    return "\n".join(lines) + "\n"


def _definition_lines(run: RunRecord, definition: JsonDict) -> list[str]:
    """How the run's pinned definition compares with the flow in the files now (nothing when they match)."""
    files = definition.get("files")
    if files == "differ":
        return [
            f"          the files now define {run.flow}@{definition.get('current_version')} "
            f"({definition.get('current_digest')}); this run stays on its pinned definition"
        ]
    if files == "missing":
        return [
            f"          flow '{run.flow}' is no longer in the files; this run keeps its pinned definition"
        ]
    if files == "unknown":
        return [f"          cannot compare with the files: {definition.get('reason')}"]
    return []


def _step_lines(steps: list[StepRow], outside: JsonDict | None) -> list[str]:
    """The `steps` table: one aligned row per step, its failed tool calls under it, then usage outside steps."""
    if not steps:
        return []
    lines = ["steps"]
    width = max(len(entry["step"]) for entry in steps)
    used = _usage_columns(steps, outside)
    for entry in steps:
        tries = f" ({entry['attempts']} attempts)" if entry["attempts"] > 1 else ""
        error = (
            f"  {entry['error']}" if entry["status"] == RunStatus.FAILED and entry["error"] else ""
        )
        tool_errors = entry.get("tool_errors") or []
        if tool_errors and not error:
            count = len(tool_errors)
            error = f"  {count} tool call{'s' if count > 1 else ''} failed"
        lines.append(
            f"  {entry['step'].ljust(width)}  {entry['status']:<11} "
            f"{format_duration(entry['duration_ms'] / 1000):>9}{used.get(entry['step'], '')}"
            f"{tries}{error}".rstrip()
        )
        for failure in tool_errors:
            item = f"[{failure['index']}]" if failure.get("index") is not None else ""
            lines.append(f"    tool {failure['tool']}{item} failed: {failure['error']}")
    if outside is not None:
        lines.append(
            f"  {OUTSIDE_STEPS.ljust(width)}  {'':<11} {'':>9}{used.get(OUTSIDE_STEPS, '')}".rstrip()
        )
    return lines


def _written_lines(run: RunRecord, wrote: JsonDict | None) -> list[str]:
    """Where the run wrote files, and each file with its size and the step that wrote it."""
    if not wrote or not wrote["files"]:
        return []
    where = (
        f"{wrote['folder']}/"
        if wrote["folder"]
        else f"the run's workspace ({WORKSPACES}/{run.id}/)"
    )
    lines = [f"files     written to {where}"]
    width = max(len(entry["path"]) for entry in wrote["files"])
    for entry in wrote["files"]:
        again = f", written {entry['writes']} times" if entry["writes"] > 1 else ""
        lines.append(
            f"  {entry['path'].ljust(width)}  {entry['bytes']} bytes by {entry['step']}{again}"
        )
    return lines


def _decided_lines(decided: list[gate_rows.Gate]) -> list[str]:
    """The gates already decided: rows of the gates table, not approval_required events like the waiting ones."""
    lines: list[str] = []
    for row in decided:
        decision = row.decision or {}
        who = f" by {row.actor}" if row.actor else ""
        values = f" {store.dumps(decision['values'])}" if decision.get("values") else ""
        why = f" ({decision['reason']})" if decision.get("reason") else ""
        lines.append(
            f"decided   gate '{row.gate}': {row.status}{who} at {local_time(row.decided)}{values}{why}"
        )
    return lines


def _next_command_lines(run: RunRecord, status: RunStatus, gates: list[Event]) -> list[str]:
    """The command that carries the run on, when there is one: resume after a failure, decide a waiting gate."""
    if status in (RunStatus.FAILED, RunStatus.INTERRUPTED) and run.mode not in NO_CHECKPOINTS:
        return [f"resume    blockyard resume {run.id}"]
    if status == RunStatus.WAITING:
        which = " --gate NAME" if len(gates) > 1 else ""
        return [
            f"decide    blockyard resume {run.id}{which} --approve [--set FIELD=VALUE]... | --reject"
        ]
    return []


def _usage_columns(steps: list[StepRow], outside: JsonDict | None) -> dict[str, str]:
    """Per step label, its model calls, tokens in / out and cost as aligned columns (with the number of
    map items or iterations they were summed over); nothing at all when the run made no model call."""
    usages = {entry["step"]: (entry.get("usage") or {}, entry.get("items") or 0) for entry in steps}
    if outside is not None:
        usages[OUTSIDE_STEPS] = (outside, 0)
    if not any(usage.get("model_calls") for usage, _items in usages.values()):
        return {}
    cells: dict[str, list[str]] = {}
    for label, (usage, items) in usages.items():
        calls = int(usage.get("model_calls") or 0)
        if not calls:
            cells[label] = ["", "", "", ""]
            continue
        over = f"over {items} items" if items > 1 else ""
        cells[label] = [
            f"{calls} call{'s' if calls > 1 else ''}",
            f"{compact(int(usage.get('input_tokens') or 0))} in / "
            f"{compact(int(usage.get('output_tokens') or 0))} out",
            str(usage.get("cost") or "-"),
            over,
        ]
    widths = [max(len(row[i]) for row in cells.values()) for i in range(4)]
    return {
        label: "  "
        + "  ".join(
            [row[0].rjust(widths[0]), row[1].rjust(widths[1]), row[2].ljust(widths[2]), row[3]]
        ).rstrip()
        for label, row in cells.items()
        if row[0]
    }


def _yaml_block(value: Any) -> str:
    if not value:
        return "    {}" if isinstance(value, dict) else f"    {value!r}"
    text = yaml.safe_dump(
        value, sort_keys=False, allow_unicode=True, default_flow_style=False
    ).rstrip("\n")
    return "\n" + "\n".join("  " + line for line in text.splitlines())


# ---- the commands ---------------------------------------------------------------------------------


@click.group("runs", cls=Group, invoke_without_command=True)
@click.option("--flow", default=None, help="Only runs of this flow.")
@click.option("--status", default=None, help="Only runs with this status.")
@click.option("--limit", type=LIMIT, default=50, show_default=True, help="How many runs to show.")
@ROOT_OPTION
@click.pass_context
def runs(
    ctx: click.Context, flow: str | None, status: str | None, limit: int, root: Path | None
) -> None:
    """List runs, newest first."""
    if ctx.invoked_subcommand is None:
        raise SystemExit(print_runs(root_of(root), flow, status, limit))


@runs.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@ROOT_OPTION
def runs_show(run_id: str, as_json: bool, root: Path | None) -> None:
    """Show one run: inputs, outputs, steps, error, waiting gates."""
    raise SystemExit(print_run(root_of(root), run_id, as_json))
