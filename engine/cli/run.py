"""`blockyard run`, `resume` and `graph`: arguments in, text out.

The work is the Yard's; this module turns command-line values into typed inputs, drives the
display, prints the result and picks the exit code (docs/cli.md: 0 ok, 1 failed, 2 usage,
3 waiting for approval, 130 interrupted). The runtime (and so LangGraph) is imported only when
one of these commands runs, not for the CLI's light commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from engine.cli import progress, startup
from engine.cli.options import ROOT_OPTION, Command, read_argument, root_of
from engine.cli.progress import format_duration
from engine.core.errors import UsageError
from engine.core.events import (
    APPROVAL_REQUIRED,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    TERMINAL_TYPES,
    Event,
    RunStatus,
)
from engine.core.values import JsonDict, ValueDomainError, text_problem
from engine.definitions.files import argument_bounds
from engine.definitions.load import Document, LoadError, load_file, parse_value
from engine.spec import TypeSpec
from engine.spec.common import DURABILITY_MODES
from engine.spec.decisions import APPROVE, chosen
from engine.spec.durability import NO_CHECKPOINTS
from engine.state.gates import GateStatus

if TYPE_CHECKING:
    from engine.runtime.yard import Yard

SIGTERM_EXIT = 143


def gather_inputs(
    declared: Mapping[str, TypeSpec],
    pairs: list[str],
    inputs_file: Path | None,
    root: Path | None = None,
) -> JsonDict:
    """`--inputs-file` then `--input k=v` (which win). A value is YAML 1.2 (`7` a number, `[1,2]`
    a list) except for inputs declared `string`, which take the text exactly as typed (`007`).
    An inputs file inside the yard `root` must not be a link that leads out of it."""
    values: JsonDict = {}
    if inputs_file is not None:
        bounds = argument_bounds(inputs_file, root) if root is not None else None
        try:
            data = load_file(
                inputs_file, str(inputs_file), bounds=bounds, pipes=bounds is None
            ).data
        except LoadError as exc:
            raise UsageError(f"--inputs-file: {exc.diagnostic.format()}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise UsageError(
                f"--inputs-file {inputs_file}: expected a mapping of input names to values"
            )
        values.update(data)
    values.update(parse_pairs(pairs, declared, "--input", "KEY"))
    return values


def parse_pairs(
    pairs: list[str], declared: Mapping[str, TypeSpec], option: str, name: str
) -> JsonDict:
    """`K=V` pairs; V is YAML 1.2, except where K is declared a string (then `007` stays text)."""
    values: JsonDict = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"{option} '{pair}': expected {name}=VALUE")
        spec = declared.get(key)
        try:
            problem = text_problem(text)
            if problem is not None:  # refused for string inputs too: no database can store it
                raise ValueDomainError(f"the value {problem}")
            values[key] = text if spec is not None and spec.type == "string" else parse_value(text)
        except ValueDomainError as exc:
            raise UsageError(f"{option} '{key}': {exc}") from None
    return values


def run_command(
    root: Path,
    flow: str,
    inputs: list[str],
    inputs_file: Path | None,
    run_id: str | None,
    thread: str | None,
    as_json: bool,
    *,
    output_dir: str | None = None,
    durability: str | None = None,
    trace: bool | None = None,
    after: str | None = None,
) -> int:
    """Run a flow by name, showing progress; the exit code tells how it ended. `durability` and
    `trace` (docs/runtime.md, "Durability") win over the flow's and the yard's; `after`: the turn of
    `thread` it goes on from (docs/memory.md, "Branches")."""
    with startup.loading():  # the runtime's imports and the yard, without the collector's scans
        from engine.runtime.yard import Yard  # LangGraph: only when a flow runs

        yard = Yard.load(root)
    try:
        given = gather_inputs(yard.bundle(flow).flow.inputs, inputs, inputs_file, root)
        return _drive(
            progress.choose(as_json=as_json),
            lambda: yard.astream(
                flow,
                given,
                run_id=run_id,
                thread=thread,
                output_dir=output_dir,
                durability=durability,
                trace=trace,
                after=after,
            ),
            as_json,
        )
    finally:
        yard.close()


def plan_command(
    root: Path,
    plan: Path,
    inputs: list[str],
    inputs_file: Path | None,
    run_id: str | None,
    as_json: bool,
    *,
    output_dir: str | None = None,
    durability: str | None = None,
    trace: bool | None = None,
) -> int:
    """Run a TaskPlan at once (docs/taskplans.md): validated like a flow, pinned with the run."""
    # the TaskPlan converter and its spec models: only `run --plan` and `compose --run` load them
    from engine.interchange.taskplan import read_plan

    doc = read_plan(read_argument(plan, root), plan.name)
    return run_plan(
        root,
        doc,
        inputs,
        inputs_file,
        run_id,
        as_json,
        output_dir=output_dir,
        durability=durability,
        trace=trace,
    )


def run_plan(
    root: Path,
    doc: Document,
    inputs: list[str],
    inputs_file: Path | None,
    run_id: str | None,
    as_json: bool,
    *,
    name: str | None = None,
    output_dir: str | None = None,
    durability: str | None = None,
    trace: bool | None = None,
) -> int:
    """Run a plan's document (`run --plan`, `compose --run`), showing progress; the exit code tells how it ended."""
    with startup.loading():  # the runtime's imports and the yard, without the collector's scans
        # a TaskPlan's converter: only when one runs
        from engine.interchange.taskplan import plan_bundle
        from engine.runtime.yard import Yard  # LangGraph: only when a flow runs

        yard = Yard.load(root)
    try:
        bundle = plan_bundle(doc, yard.project, name=name)
        given = gather_inputs(bundle.flow.inputs, inputs, inputs_file, root)
        return _drive(
            progress.choose(as_json=as_json),
            lambda: yard.engine.astream(
                bundle,
                given,
                run_id=run_id,
                output_dir=output_dir,
                durability=durability,
                trace=trace,
            ),
            as_json,
        )
    finally:
        yard.close()


def resume_command(
    root: Path,
    run_id: str,
    decision: str | None,
    reason: str | None,
    values: list[str],
    gate: str | None,
    actor: str | None,
    as_json: bool,
    budget: list[str] | None = None,
) -> int:
    """Decide the gate a run waits at (`--approve`/`--reject` with `--set`, `--reason`, `--gate`,
    `--as`), or continue a failed or interrupted run from its last checkpoint — on its pinned definition."""
    if decision is None:
        given = [
            name
            for name, value in (
                ("--reason", reason),
                ("--set", values),
                ("--gate", gate),
                ("--as", actor),
            )
            if value
        ]
        if given:
            raise UsageError(f"{given[0]} needs a decision: --approve or --reject")
    with startup.loading():  # the runtime's imports, without the collector's scans
        from engine.runtime.yard import Yard  # LangGraph: only when a run goes on

        yard = Yard.open(root)
    try:
        typed = field_values(yard, run_id, gate, values)
        limits = budget_values(budget or [])
        approve = None if decision is None else decision == "approve"
        return _drive(
            progress.choose(as_json=as_json),
            lambda: yard.astream_resume(
                run_id,
                approve=approve,
                values=typed,
                reason=reason,
                gate=gate,
                actor=actor,
                budget=limits,
            ),
            as_json,
        )
    finally:
        yard.close()


BUDGET_KEYS = ("tokens", "cost_usd", "model_calls", "wall_time")


def budget_values(pairs: list[str]) -> JsonDict:
    """`--budget KEY=VALUE` pairs (`tokens=50000`, `cost_usd=2.5`, `wall_time=10m`, `per_turn.tokens=8000`):
    numbers as numbers, durations as text; the engine checks them against the budget's schema."""
    limits: JsonDict = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        name = key.removeprefix("per_turn.")
        if not sep or name not in BUDGET_KEYS:
            raise UsageError(
                f"--budget {pair!r}: use KEY=VALUE with KEY one of {', '.join(BUDGET_KEYS)} "
                "(or per_turn.KEY)"
            )
        value: Any = text.strip()
        if name != "wall_time":
            try:
                value = int(value) if name in ("tokens", "model_calls") else float(value)
            except ValueError:
                raise UsageError(f"--budget {pair!r}: {name} is a number") from None
        limits[key] = value
    return limits


def field_values(yard: Yard, run_id: str, gate: str | None, pairs: list[str]) -> JsonDict:
    """`--set k=v` values, read like `--input`: text as typed for the gate's string fields, YAML
    otherwise (the Yard judges them, and the gate, once more before anything is written)."""
    from engine.runtime.approvals import choose  # the runtime, with LangGraph: only when deciding

    declared: dict[str, TypeSpec] = {}
    if pairs:
        rows = yard.gates(run_id)
        try:
            waiting = {g.interrupt_id: g.request for g in rows if g.status == GateStatus.WAITING}
            chosen = choose(rows, waiting, gate, run_id)
            declared = {name: TypeSpec.model_validate(spec) for name, spec in chosen.fields.items()}
        except UsageError:
            pass  # the Yard says what is wrong with the run or the gate
    return parse_pairs(pairs, declared, "--set", "FIELD")


class _Outcome:
    def __init__(self) -> None:
        self.run_id: str | None = None
        self.last: Event | None = None
        self.gates: list[Event] = []
        self.terminated = False
        self.ephemeral = False  # a run with durability none: it cannot be resumed

    def see(self, event: Event) -> None:
        self.run_id = event.run_id
        if event.type == RUN_STARTED and event.data.get("durability") in NO_CHECKPOINTS:
            self.ephemeral = True
        if event.type in TERMINAL_TYPES:
            self.last = event
        if event.type == APPROVAL_REQUIRED:
            self.gates.append(event)


def _drive(
    display: progress.Progress, make: Callable[[], AsyncIterator[Event]], as_json: bool
) -> int:
    outcome = _Outcome()
    try:
        asyncio.run(_consume(display, make, outcome))
    except KeyboardInterrupt:
        return _stopped(outcome, 130)
    except asyncio.CancelledError:
        if outcome.terminated:
            return _stopped(outcome, SIGTERM_EXIT)
        raise
    return _report(outcome, as_json)


async def _consume(
    display: progress.Progress, make: Callable[[], AsyncIterator[Event]], outcome: _Outcome
) -> None:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()

    def terminate() -> None:  # `kill PID`: stop like Ctrl-C, so the run is recorded as interrupted
        outcome.terminated = True
        if task is not None:
            task.cancel()

    # No SIGTERM handler where the loop cannot install one (Windows, a non-main thread): then
    # `kill PID` ends the process as before; nothing else depends on the handler.
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, terminate)
    await display.start()
    try:
        async for event in make():
            outcome.see(event)
            display.event(event)
    finally:
        await display.stop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)


def _stopped(outcome: _Outcome, code: int) -> int:
    if outcome.run_id and outcome.ephemeral:
        _err(
            f"interrupted: run {outcome.run_id} stopped before it finished; it kept no checkpoint (durability "
            "none): start it again"
        )
    elif outcome.run_id:
        _err(
            f"interrupted: run {outcome.run_id} stopped before it finished; continue it with "
            f"`blockyard resume {outcome.run_id}`"
        )
    else:
        _err("interrupted")
    return code


def _report(outcome: _Outcome, as_json: bool) -> int:
    last = outcome.last
    if last is None:  # pragma: no cover - every execution ends with a terminal event
        _err("error: the run ended without a result")
        return 1
    run_id = last.run_id
    if last.type == RUN_FINISHED:
        if not as_json:
            outputs = last.data.get("outputs") or {}
            if outputs:
                sys.stdout.write(
                    yaml.safe_dump(
                        outputs, sort_keys=False, allow_unicode=True, default_flow_style=False
                    )
                )
                sys.stdout.flush()
            seconds = last.data.get("duration_ms")
            took = (
                f" in {format_duration(seconds / 1000)}" if isinstance(seconds, int | float) else ""
            )
            _err(f"run {run_id} finished{took}")
        return 0
    if last.type == RUN_FAILED:
        if last.data.get("status") == RunStatus.INTERRUPTED:
            return _stopped(outcome, 130)
        again = (
            "it kept no checkpoint (durability none): after fixing the cause, run it again"
            if outcome.ephemeral
            else f"after fixing the cause, continue it with `blockyard resume {run_id}`"
        )
        _err(f"error: {failure_line(run_id, last.data)}\n  {again}")
        return 1
    for gate in outcome.gates:
        value = gate.data.get("value")
        message = value.get("message") if isinstance(value, dict) else value
        name = (value.get("gate") if isinstance(value, dict) else None) or gate.step
        where = f" at gate '{name}'" if name else ""
        _err(f"run {run_id} is waiting for approval{where}" + (f": {message}" if message else ""))
        fields = value.get("fields") if isinstance(value, dict) else None
        if fields:
            _err(
                "  fields: "
                + ", ".join(
                    f"{key} ({spec.get('type', 'any')}"
                    + (", optional" if "default" in spec else "")
                    + ")"
                    for key, spec in fields.items()
                )
            )
        allowed = value.get("allowed") if isinstance(value, dict) else None
        if isinstance(allowed, list):  # an agent's tool call: the decisions its block allows
            _err("  allowed: " + ", ".join(str(word) for word in allowed))
    which = " --gate NAME" if len(outcome.gates) > 1 else ""
    with_fields = any(
        isinstance(g.data.get("value"), dict) and g.data["value"].get("fields")
        for g in outcome.gates
    )
    sets = " [--set FIELD=VALUE]..." if with_fields else ""
    _err(f"  decide: blockyard resume {run_id}{which} --approve{sets} | --reject [--reason R]")
    return 3


def failure_line(run_id: str, data: Mapping[str, Any]) -> str:
    """'run X failed at step 's' (block 'b'): reason'."""
    step = data.get("step")
    where = f" at step '{step}'" if step else ""
    if data.get("block") and data.get("block") != step:
        where += f" (block '{data['block']}')"
    return f"run {run_id} failed{where}: {data.get('error')}"


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def graph_command(root: Path, flow: str, fmt: str) -> int:
    """Print a flow's graph as Mermaid, Graphviz dot or JSON (the graph model: engine/compile/flowgraph.py).
    The flow is compiled first, so that one `blockyard run` would refuse is refused here too."""
    from engine.runtime.yard import Yard  # LangGraph: compiles the flow

    yard = Yard.load(root)
    try:
        compiled = yard.compiled(yard.bundle(flow), durable=False)
        text = compiled.drawing(fmt)
    finally:
        yard.close()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


# ---- the commands ---------------------------------------------------------------------------------


@click.command(cls=Command)
@click.argument("flow", required=False)
@click.option(
    "--plan",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Run this TaskPlan (JSON, docs/taskplans.md) instead of a flow of the yard.",
)
@click.option(
    "--input",
    "-i",
    "inputs",
    multiple=True,
    metavar="K=V",
    help="An input; V is read as a YAML value (7 is a number, [1,2] a list).",
)
@click.option(
    "--inputs-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A YAML or JSON mapping of inputs.",
)
@click.option("--run-id", default=None, help="Id for the run (default: generated).")
@click.option("--thread", default=None, help="Run inside an existing conversation thread.")
@click.option(
    "--after",
    default=None,
    metavar="RUN",
    help="With --thread: go on from that finished turn instead of the latest (a new branch); "
    "__start__: a new first turn (docs/memory.md).",
)
@click.option(
    "--output",
    "output_dir",
    default=None,
    metavar="DIR",
    help="Folder of the yard the run's file tools write to (default: the flow's output_dir, "
    "else .blockyard/workspaces/<run>/).",
)
@click.option(
    "--durability",
    type=click.Choice(DURABILITY_MODES),
    default=None,
    help="How the run is checkpointed (default: the flow's durability, else blockyard.yaml's, else sync; "
    "docs/runtime.md).",
)
@click.option(
    "--no-trace",
    "no_trace",
    is_flag=True,
    help="Record no event trace (only with durability none; the runs row is still recorded).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line.")
@ROOT_OPTION
def run(
    flow: str | None,
    plan: Path | None,
    inputs: tuple[str, ...],
    inputs_file: Path | None,
    run_id: str | None,
    thread: str | None,
    after: str | None,
    output_dir: str | None,
    durability: str | None,
    no_trace: bool,
    as_json: bool,
    root: Path | None,
) -> None:
    """Run a flow by name (or a TaskPlan with --plan)."""
    if (flow is None) == (plan is None):
        raise UsageError("name a flow to run, or give --plan PLAN.json (not both)")
    trace = False if no_trace else None
    if plan is not None:
        if thread is not None or after is not None:
            raise UsageError("--thread runs a flow of the yard; a plan runs on its own")
        raise SystemExit(
            plan_command(
                root_of(root),
                plan,
                list(inputs),
                inputs_file,
                run_id,
                as_json,
                output_dir=output_dir,
                durability=durability,
                trace=trace,
            )
        )
    assert flow is not None
    if after is not None and thread is None:
        raise UsageError("--after names a turn of the conversation --thread names")
    raise SystemExit(
        run_command(
            root_of(root),
            flow,
            list(inputs),
            inputs_file,
            run_id,
            thread,
            as_json,
            output_dir=output_dir,
            durability=durability,
            trace=trace,
            after=after,
        )
    )


@click.command(cls=Command)
@click.argument("run_id")
@click.option(
    "--decision",
    "word",
    type=click.Choice(["approve", "reject"]),
    default=None,
    help="Decide the waiting gate: approve or reject (--approve and --reject are short for it).",
)
@click.option(
    "--approve",
    "decision",
    flag_value="approve",
    help="Approve the waiting gate (--decision approve).",
)
@click.option(
    "--reject", "decision", flag_value="reject", help="Reject the waiting gate (--decision reject)."
)
@click.option("--reason", default=None, help="Why (recorded in the trace).")
@click.option("--set", "values", multiple=True, metavar="K=V", help="A gate field value.")
@click.option("--gate", default=None, help="Which gate, when several are waiting.")
@click.option(
    "--as", "actor", default=None, help="Who decides (checked against the gate's approvers)."
)
@click.option(
    "--budget",
    "budget",
    multiple=True,
    metavar="KEY=V",
    help="Raise a limit of the run's budget first: tokens, cost_usd, model_calls, wall_time, "
    "per_turn.KEY (e.g. --budget tokens=50000).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line.")
@ROOT_OPTION
def resume(
    run_id: str,
    word: str | None,
    decision: str | None,
    reason: str | None,
    values: tuple[str, ...],
    gate: str | None,
    actor: str | None,
    budget: tuple[str, ...],
    as_json: bool,
    root: Path | None,
) -> None:
    """Continue a run: decide a waiting gate, or go on after a crash or failure."""
    decided = chosen(word, None if decision is None else decision == APPROVE)
    raise SystemExit(
        resume_command(
            root_of(root), run_id, decided, reason, list(values), gate, actor, as_json, list(budget)
        )
    )


@click.command(cls=Command)
@click.argument("flow")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mermaid", "dot", "json", "reactflow"]),
    default="mermaid",
    show_default=True,
    help="Mermaid flowchart, Graphviz DOT, the graph model as JSON (nodes, edges, "
    "groups), or a React Flow graph (docs/reactflow.md).",
)
@ROOT_OPTION
def graph(flow: str, fmt: str, root: Path | None) -> None:
    """Print a flow's graph."""
    raise SystemExit(graph_command(root_of(root), flow, fmt))
