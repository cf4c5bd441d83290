"""`blockyard eval [NAME...]`: run the yard's evals (evals/*.yaml) and report (docs/evals.md).

The table goes to stdout (or with --json the whole outcome as one JSON document), the progress to
stderr; --junit and --markdown write files. Exit 0 when every eval reached its thresholds (and with
`--fail-on regression`, none got worse than on the base), 1 otherwise, 2 for a usage error. The eval
files' own problems stop it as `blockyard validate` reports them (exit 1).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command, root_of, state_location
from engine.core.errors import UsageError
from engine.evals import junit, markdown, report
from engine.evals.command import Options, evaluate
from engine.evals.history import versions
from engine.state.backends import reading


@click.command("eval", cls=Command)
@click.argument("names", nargs=-1)
@click.option(
    "--base",
    metavar="REV",
    default=None,
    help="Also evaluate the yard at this git revision (or folder) on the same cases, and compare; only the "
    "evals whose flow or block changed run (see --all).",
)
@click.option(
    "--all", "everything", is_flag=True, help="With --base: run every eval, changed or not."
)
@click.option(
    "--fail-on",
    type=click.Choice(["regression"]),
    default=None,
    help="regression: exit 1 when an eval's pass rate or mean score got worse than on the base "
    "(beyond --tolerance).",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="How much worse a pass rate or mean score may get before it is a regression (0.05: 5 points).",
)
@click.option(
    "--junit",
    "junit_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the results as JUnit XML to this file.",
)
@click.option(
    "--markdown",
    "markdown_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the results as Markdown (a pull-request comment, a job summary) to this file.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the outcome as JSON instead of the table."
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="How many cases run at once.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Ask the models every time: neither read nor keep cached replies.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where model replies are cached (default: $BLOCKYARD_EVAL_CACHE, else .blockyard/cache/models).",
)
@click.option(
    "--history",
    "history_of",
    metavar="NAME",
    default=None,
    help="Show how eval NAME's results moved across the versions of its flow, and run nothing.",
)
@ROOT_OPTION
def eval_(
    names: tuple[str, ...],
    base: str | None,
    everything: bool,
    fail_on: str | None,
    tolerance: float,
    junit_file: Path | None,
    markdown_file: Path | None,
    as_json: bool,
    jobs: int,
    no_cache: bool,
    cache_dir: Path | None,
    history_of: str | None,
    root: Path | None,
) -> None:
    """Run the yard's evals (evals/*.yaml), or those named: cases, assertions, judges, thresholds."""
    yard = root_of(root)
    if history_of is not None:
        if names or base is not None:
            raise UsageError(
                "--history shows kept results and runs nothing: give no eval names or --base with it"
            )
        _history(yard, history_of, as_json)
        return
    if everything and base is None:
        raise UsageError("--all goes with --base REV")
    if fail_on is not None and base is None:
        raise UsageError("--fail-on regression compares with a base: give --base REV")
    for wanted in (junit_file, markdown_file):  # refused now, not after every case has run
        if wanted is not None and not wanted.absolute().parent.is_dir():
            raise UsageError(f"cannot write {wanted}: no such folder {wanted.absolute().parent}")
    options = Options(
        list(names),
        base,
        everything,
        jobs,
        not no_cache,
        cache_dir,
        tolerance,
        fail_on == "regression",
    )
    outcome = evaluate(yard, options)
    if junit_file is not None:
        _write(junit_file, junit.render(outcome))
    if markdown_file is not None:
        _write(markdown_file, markdown.render(outcome))
    if as_json:
        click.echo(json.dumps(outcome.as_dict(), ensure_ascii=False, indent=2, default=str))
    else:
        sys.stdout.write(
            report.render(outcome, colour=sys.stdout.isatty() and "NO_COLOR" not in os.environ)
        )
    raise SystemExit(outcome.exit_code)


def _history(yard: Path, name: str, as_json: bool) -> None:
    with reading(state_location(yard)) as conn:
        found = versions(conn, name) if conn is not None else []
    if as_json:
        click.echo(
            json.dumps(
                {"eval": name, "versions": [version.as_dict() for version in found]}, indent=2
            )
        )
    else:
        sys.stdout.write(
            report.history_table(
                name, found, colour=sys.stdout.isatty() and "NO_COLOR" not in os.environ
            )
        )


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
