"""`blockyard optimize`: compile a smart block with DSPy (the work is engine/smart/optimize.py)."""

from __future__ import annotations

from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command, root_of
from engine.smart import optimize as optimizer


@click.command("optimize", cls=Command)
@click.argument("block")
@click.option(
    "--examples",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="A YAML or JSON list of examples: the block's inputs and the outputs expected for them.",
)
@click.option(
    "--max-demos", default=4, show_default=True, help="Most demos bootstrapped from the examples."
)
@click.option(
    "--max-labeled", default=16, show_default=True, help="Most examples added as demos as they are."
)
@ROOT_OPTION
def optimize(
    block: str, examples: Path, max_demos: int, max_labeled: int, root: Path | None
) -> None:
    """Compile a smart block with DSPy (BootstrapFewShot); saves the program next to the block."""
    raise SystemExit(
        optimizer.optimize_command(root_of(root), block, examples, max_demos, max_labeled)
    )
