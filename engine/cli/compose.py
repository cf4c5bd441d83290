"""`blockyard compose "INTENT"`: a model drafts a TaskPlan from the yard's catalog, repaired until it
validates (at most three rounds), written as flows/NAME.yaml for review or run at once with `--run`
(docs/compose.md). The work is engine/interchange/compose.py; this module picks the model profile,
tells each round on stderr, and writes or runs the result."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from engine.cli.interchange import report
from engine.cli.options import ROOT_OPTION, Command, root_of
from engine.cli.run import run_plan
from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError
from engine.definitions.project import Project, load_project, relative
from engine.interchange.compose import ROUNDS, Round, compose, flow_name, problem_text
from engine.interchange.files import check_name, write_flow
from engine.interchange.taskplan import plan_flow
from engine.models.resolver import DEFAULT, ModelResolver


def compose_command(
    root: Path,
    intent: str,
    *,
    name: str | None,
    force: bool,
    profile: str | None,
    run: bool,
    inputs: list[str],
    inputs_file: Path | None,
    run_id: str | None,
    as_json: bool,
    output_dir: str | None,
) -> int:
    project = load_project(root)
    flow = check_name(name or flow_name(intent), "--name")
    if not run:
        _check_free(project, flow, force)
    resolver = ModelResolver(project.config)
    if profile not in (None, DEFAULT) and profile not in project.config.models:
        raise UsageError(
            f"--model '{profile}': no such model profile in blockyard.yaml"
            f"{did_you_mean(profile, [*project.config.models, DEFAULT])}"
        )
    if profile in (None, DEFAULT) and resolver.default_note:
        sys.stderr.write(f"note: {resolver.default_note}\n")
    composed = asyncio.run(
        compose(project, intent, resolver.for_profile(profile), name=flow, on_round=_tell)
    )
    if run:
        return run_plan(
            project.root,
            composed.doc,
            inputs,
            inputs_file,
            run_id,
            as_json,
            name=flow,
            output_dir=output_dir,
        )
    written = write_flow(
        project,
        plan_flow(composed.doc, project, name=flow),
        {},
        origin="blockyard compose",
        force=force,
    )
    return report(written, project.root)


def _check_free(project: Project, flow: str, force: bool) -> None:
    """Refuse before asking the model when flows/NAME.yaml exists (write_flow checks again)."""
    path = project.root / project.config.paths.flows / f"{flow}.yaml"
    if path.exists() and not force:
        raise UsageError(
            f"{relative(path, project.root)} already exists; choose another --name, or pass --force "
            "to replace it"
        )


def _tell(round_: Round, number: int) -> None:
    errors = round_.errors
    if not errors:
        steps = ", ".join(str(step.get("block_id")) for step in round_.plan.get("steps") or [])
        sys.stderr.write(f"round {number}: the plan validates ({steps})\n")
        return
    sys.stderr.write(
        f"round {number}: {len(errors)} problem{'s' if len(errors) != 1 else ''} in the plan"
        f"{'; asking the model to repair it' if number < ROUNDS else ''}\n"
    )
    for d in errors:
        sys.stderr.write(f"  {problem_text(d)}\n")


@click.command(cls=Command)
@click.argument("intent")
@click.option("--name", default=None, help="The flow's name (default: the intent's first words).")
@click.option("--force", is_flag=True, help="Replace flows/NAME.yaml if it exists.")
@click.option(
    "--model",
    "profile",
    default=None,
    metavar="PROFILE",
    help="The model profile of blockyard.yaml that drafts the plan (default: `default`).",
)
@click.option(
    "--run",
    "run_now",
    is_flag=True,
    help="Run the plan at once (like `run --plan`) instead of writing flows/NAME.yaml.",
)
@click.option(
    "--input", "-i", "inputs", multiple=True, metavar="K=V", help="With --run: an input of the run."
)
@click.option(
    "--inputs-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --run: a YAML or JSON mapping of inputs.",
)
@click.option("--run-id", default=None, help="With --run: id for the run (default: generated).")
@click.option(
    "--output",
    "output_dir",
    default=None,
    metavar="DIR",
    help="With --run: folder of the yard the run's file tools write to.",
)
@click.option("--json", "as_json", is_flag=True, help="With --run: print one JSON event per line.")
@ROOT_OPTION
def compose_cli(
    intent: str,
    name: str | None,
    force: bool,
    profile: str | None,
    run_now: bool,
    inputs: tuple[str, ...],
    inputs_file: Path | None,
    run_id: str | None,
    output_dir: str | None,
    as_json: bool,
    root: Path | None,
) -> None:
    """Draft a flow from an intent: a model picks blocks of the catalog (docs/compose.md)."""
    if not run_now:
        given = [
            option
            for option, value in (
                ("--input", inputs),
                ("--inputs-file", inputs_file),
                ("--run-id", run_id),
                ("--output", output_dir),
                ("--json", as_json),
            )
            if value
        ]
        if given:
            raise UsageError(f"{given[0]} goes with --run")
    elif force:
        raise UsageError("--force replaces a written flow; --run writes none")
    raise SystemExit(
        compose_command(
            root_of(root),
            intent,
            name=name,
            force=force,
            profile=profile,
            run=run_now,
            inputs=list(inputs),
            inputs_file=inputs_file,
            run_id=run_id,
            as_json=as_json,
            output_dir=output_dir,
        )
    )
