"""`blockyard validate`: the pre-commit path (engine/validate/command.py does the work); it imports
no LangGraph (tests/validate/test_validate_imports.py)."""

from __future__ import annotations

from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command
from engine.validate.command import validate_command


@click.command("validate", cls=Command)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github", "sarif"]), default="text",
              show_default=True, help="Report format.")
@ROOT_OPTION
def validate(paths: tuple[Path, ...], fmt: str, root: Path | None) -> None:
    """Check blocks, flows and blockyard.yaml: schema and semantics, every problem at once."""
    raise SystemExit(validate_command(list(paths), fmt, root))
