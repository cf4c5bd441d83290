"""`blockyard import reactflow|taskplan FILE` and `blockyard export reactflow FLOW`: flows from and to
other formats (docs/reactflow.md, docs/taskplans.md). Importing writes flows/<name>.yaml (and the
blocks it needs) and validates them; a graph or plan that is wrong is refused with one line per
problem (exit 1), the written files' diagnostics are reported like `blockyard validate`'s."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from engine.cli.export import langgraph
from engine.cli.options import ROOT_OPTION, Command, Group, read_argument, root_of
from engine.definitions.project import load_project, relative
from engine.interchange.blocks import BlockPlacer, slug
from engine.interchange.files import Written, check_name, write_flow
from engine.interchange.reactflow import GraphError, as_dict, convert, parse_json
from engine.interchange.taskplan import plan_flow, read_plan


def report(written: Written, root: Path) -> int:
    for name, block in written.reused.items():
        sys.stderr.write(f"reused block '{block}' for {name}\n")
    for path in written.blocks:
        sys.stdout.write(f"wrote {relative(path, root)}\n")
    sys.stdout.write(f"wrote {relative(written.flow, root)}\n")
    for problem in written.problems:
        sys.stderr.write(problem.format() + "\n")
    return 0 if written.ok else 1


def refuse(problems: list[str]) -> int:
    for problem in problems:
        sys.stderr.write(f"error: {problem}\n")
    return 1


def import_reactflow(root: Path, file: Path, name: str | None, force: bool) -> int:
    shown = file.name
    if name is not None:  # before anything is read or written: the name becomes flows/<name>.yaml
        check_name(name, "--name")
    try:
        graph = parse_json(read_argument(file, root), shown)
        project = load_project(root)
        settings = as_dict(graph.get("flow")) if isinstance(graph, dict) else {}
        flow_name = name or str(settings.get("flow") or slug(file.stem, "flow"))
        placer = BlockPlacer(project)
        converted = convert(graph, placer, name=flow_name, where=shown)
    except GraphError as exc:
        return refuse(str(exc).splitlines())
    written = write_flow(
        project,
        converted.flow,
        placer.new,
        origin=f"blockyard import reactflow {shown}",
        force=force,
        reused=placer.reused,
    )
    return report(written, project.root)


def import_taskplan(root: Path, file: Path, name: str | None, force: bool) -> int:
    shown = file.name
    if name is not None:
        check_name(name, "--name")
    project = load_project(root)
    # a PlanError is reported like validate's diagnostics
    plan = read_plan(read_argument(file, root), shown)
    flow = plan_flow(plan, project, name=name)
    written = write_flow(
        project, flow, {}, origin=f"blockyard import taskplan {shown}", force=force
    )
    return report(written, project.root)


def export_reactflow(root: Path, flow: str, output: Path | None) -> int:
    # LangGraph: the flow is compiled, as `blockyard graph` does
    from engine.runtime.yard import Yard

    yard = Yard.load(root)
    try:
        text = yard.compiled(yard.bundle(flow), durable=False).drawing("reactflow")
    finally:
        yard.close()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {output}\n")
    return 0


# ---- the commands ---------------------------------------------------------------------------------

_NAME = click.option("--name", default=None, help="The flow's name (default: from the file).")
_FORCE = click.option(
    "--force", is_flag=True, help="Replace flows/NAME.yaml and blocks of the same names."
)


@click.group("import", cls=Group)
def import_group() -> None:
    """Turn a React Flow graph or a TaskPlan into a flow file (and blocks), validated."""


@import_group.command("reactflow", cls=Command)
@click.argument("graph", type=click.Path(dir_okay=False, path_type=Path))
@_NAME
@_FORCE
@ROOT_OPTION
def reactflow(graph: Path, name: str | None, force: bool, root: Path | None) -> None:
    """Import a React Flow graph (JSON) as flows/NAME.yaml."""
    raise SystemExit(import_reactflow(root_of(root), graph, name, force))


@import_group.command("taskplan", cls=Command)
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@_NAME
@_FORCE
@ROOT_OPTION
def taskplan(plan: Path, name: str | None, force: bool, root: Path | None) -> None:
    """Import a TaskPlan (JSON) as flows/NAME.yaml, for review."""
    raise SystemExit(import_taskplan(root_of(root), plan, name, force))


@click.group("export", cls=Group)
def export_group() -> None:
    """Write a flow (or the yard's flows) in another tool's format."""


export_group.add_command(langgraph)


@export_group.command("reactflow", cls=Command)
@click.argument("flow")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the graph to this file (default: standard output).",
)
@ROOT_OPTION
def export_reactflow_command(flow: str, output: Path | None, root: Path | None) -> None:
    """Write a flow as a React Flow graph (JSON) that a visual editor opens."""
    raise SystemExit(export_reactflow(root_of(root), flow, output))
