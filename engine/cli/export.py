"""`blockyard export langgraph`: the yard's flows for LangGraph's own CLI and server
(`langgraph dev`, the LangGraph platform), as a `langgraph.json` and the module it points at
(engine/runtime/exported.py, docs/langgraph.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command, root_of
from engine.core.errors import UsageError


def langgraph_command(root: Path, output: Path | None) -> int:
    target = output if output is not None else root / "langgraph.json"
    if target.is_dir():
        raise UsageError(f"--output {target} is a folder: name the langgraph.json file to write")
    # LangGraph loads for the command that needs it, not for `blockyard --help` or `validate`
    from engine.runtime.exported import export_langgraph

    module, exported, skipped, unbuilt = export_langgraph(root, target)
    for name in skipped:
        sys.stderr.write(
            f"warning: flow '{name}' has errors and is not exported (see `blockyard validate`)\n"
        )
    for reason in unbuilt.values():
        sys.stderr.write(
            f"warning: {reason}; it is exported, and where the server cannot build it either, "
            "its graph loads and its runs fail saying so\n"
        )
    if not exported:
        sys.stderr.write("error: no flow of the yard validates: nothing exported\n")
        return 1
    sys.stdout.write(
        f"wrote {target} ({len(exported)} graph{'s' if len(exported) != 1 else ''}: "
        f"{', '.join(exported)}) and {module}\n"
    )
    return 0


# a command of the `export` group (engine/cli/interchange.py), beside `export reactflow`
@click.command("langgraph", cls=Command)
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="The langgraph.json to write (default: langgraph.json in the yard); the module its "
    "graphs point at is written beside it.",
)
@ROOT_OPTION
def langgraph(output: Path | None, root: Path | None) -> None:
    """Write langgraph.json: each flow a graph for `langgraph dev` and the LangGraph server."""
    raise SystemExit(langgraph_command(root_of(root), output))
