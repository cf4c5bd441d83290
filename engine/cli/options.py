"""What every command of the CLI shares: the `--root` option, reading a file named on the command
line, and commands that tell a lock-wait error which command waited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from engine.cli import startup
from engine.core.errors import UsageError
from engine.definitions.files import Refused, TooLarge, argument_bounds, read_bytes
from engine.definitions.project import load_project, require_yard
from engine.state.database import StateLocked
from engine.state.location import Location, of_yard

ROOT_OPTION = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The yard's root folder (default: the current directory).",
)


def root_of(root: Path | None) -> Path:
    """The yard a command works on: `--root`, else the current directory; refused when it is no yard."""
    return require_yard(root or Path.cwd())


MAX_INPUT_BYTES = 4 * 2**20


def read_argument(path: Path, root: Path) -> bytes:
    """A file named on the command line, bounded (a graph or plan is small). Here, not next to the
    import commands, so that `run --plan` does not load the React Flow converter with them."""
    try:
        return read_bytes(path, MAX_INPUT_BYTES, argument_bounds(path, root), str(path), pipes=True)
    except Refused as exc:
        raise UsageError(exc.message) from None
    except TooLarge:
        raise UsageError(f"{path}: larger than {MAX_INPUT_BYTES // 2**20} MiB") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def state_location(root: Path) -> Location:
    """The yard's state database: `database:` or BLOCKYARD_DATABASE_URL (Postgres), else `paths.state`."""
    config = load_project(root).config
    return of_yard(root, config.paths.state, config.database)


class Seconds(click.FloatRange):
    """A number of seconds in a range; NaN, which compares false with every bound, is refused too."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        seconds = super().convert(value, param, ctx)
        if seconds != seconds:  # NaN
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return float(seconds)


# Listing limits go into SQL (LIMIT ?), which takes 64-bit integers only.
LIMIT = click.IntRange(1, 100_000)


def _named(exc: Exception, ctx: click.Context) -> None:
    """Tell a lock-wait error which command waited (`memory set`, `runs show`): several may run at once."""
    if isinstance(exc, StateLocked) and exc.command is None:
        words = ctx.command_path.split()[1:]  # without the program's name
        action = ctx.params.get("action")  # `memory ACTION`: the action is what the user ran
        exc.command = " ".join([*words, action] if isinstance(action, str) else words)


# ctx.meta (shared by a command's contexts): the command running, for an error naming it (engine/cli)
RUNNING = "blockyard.command"


class Command(click.Command):
    def invoke(self, ctx: click.Context) -> object:
        ctx.meta[RUNNING] = ctx.command_path
        startup.settle()  # the command's work runs with the garbage collector on
        try:
            return super().invoke(ctx)
        except Exception as exc:
            _named(exc, ctx)
            raise


class Group(click.Group):
    command_class = Command
    group_class = type  # subgroups are Groups too

    def invoke(self, ctx: click.Context) -> object:
        ctx.meta[RUNNING] = ctx.command_path  # its subcommand, if one runs, names itself
        if ctx.parent is not None:
            # a command's group (`runs`, which may do the work itself), not `blockyard`
            startup.settle()  # the command's work runs with the garbage collector on
        try:
            return super().invoke(ctx)
        except Exception as exc:
            _named(exc, ctx)  # the innermost command named it already, if it was a subcommand's
            raise
