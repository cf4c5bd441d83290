"""`blockyard validate`: the pre-commit path (engine/validate/command.py does the work); it imports
no LangGraph (tests/validate/test_validate_imports.py)."""

from __future__ import annotations

from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command
from engine.validate.command import validate_command


@click.command("validate", cls=Command)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github", "sarif"]),
    default="text",
    show_default=True,
    help="Report format.",
)
@click.option(
    "--base",
    metavar="REV",
    default=None,
    help="Also apply the version policy against this git revision (or folder): a block or flow whose "
    "contract or prompt changed needs a new `version:` (docs/review.md).",
)
@ROOT_OPTION
def validate(paths: tuple[Path, ...], fmt: str, base: str | None, root: Path | None) -> None:
    """Check blocks, flows and blockyard.yaml: schema and semantics, every problem at once."""
    policy = None
    if base is not None:
        # the version policy reads git and compares two yards: only `--base` pays for loading it
        from engine.review.versions import base_problems

        policy = base_problems(base)
    raise SystemExit(validate_command(list(paths), fmt, root, policy))
