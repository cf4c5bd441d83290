"""The command line: `blockyard` (= `python -m engine`).

Each command family has its module here, holding its click commands next to the code that serves
them: validate.py, catalog.py (flows, blocks), starter.py (init), flowtests.py (test), eval.py (eval),
optimize.py, run.py (run, resume, graph), runs.py (runs, runs show), stats.py (stats), gates.py, threads.py,
memory.py, serve.py (serve, watch, schedules), mcp_stdio.py (mcp), interchange.py (import, export), compose.py.
A family's module is imported only when one of its commands runs (`COMMANDS`), and LangGraph, the server and
croniter only inside the commands that need them, so `blockyard validate` starts fast
(tests/validate/test_validate_imports.py).

This module is the one boundary that turns errors into exit codes: BlockyardError -> its
code with one clear message, Ctrl-C -> 130, anything else -> 4 with the traceback saved to a
log file for a bug report (never printed at the user). It is also where a command that needs the
engine's runtime finds it missing: `pip install .` of this repository (the pre-commit hook) installs
`blockyard-core` without its `run` extra, enough for `validate`, `diff`, `flows`, `blocks`, `init`
and the state listings; the others stop with one line saying what to install (engine/core/extras.py, docs/review.md).
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import click

from engine.cli import startup
from engine.cli.options import RUNNING, Group
from engine.core import extras
from engine.core.errors import BlockyardError, UsageError, ValidationFailed
from engine.core.values import text_problem
from engine.core.version import __version__

# command -> "module:click command"
COMMANDS = {
    "validate": "engine.cli.validate:validate",
    "diff": "engine.cli.diff:diff",
    "flows": "engine.cli.catalog:flows",
    "blocks": "engine.cli.catalog:blocks",
    "init": "engine.cli.starter:init",
    "test": "engine.cli.flowtests:test_",
    "eval": "engine.cli.eval:eval_",
    "optimize": "engine.cli.optimize:optimize",
    "run": "engine.cli.run:run",
    "resume": "engine.cli.run:resume",
    "graph": "engine.cli.run:graph",
    "runs": "engine.cli.runs:runs",
    "stats": "engine.cli.stats:stats_cli",
    "gates": "engine.cli.gates:gates_cli",
    "threads": "engine.cli.threads:threads_cli",
    "memory": "engine.cli.memory:memory",
    "serve": "engine.cli.serve:serve",
    "mcp": "engine.cli.mcp_stdio:mcp",
    "watch": "engine.cli.serve:watch",
    "schedules": "engine.cli.serve:schedules",
    "db": "engine.cli.db:db",
    "gc": "engine.cli.gc:gc",
    "import": "engine.cli.interchange:import_group",
    "export": "engine.cli.interchange:export_group",
    "compose": "engine.cli.compose:compose_cli",
}

if TYPE_CHECKING:
    # every command, imported for the checks only: import-linter sees each edge, mypy checks each is
    # a click command (tests/test_registries.py keeps this list in step with COMMANDS; docs/architecture.md)
    from engine.cli import (
        catalog,
        compose,
        db,
        diff,
        eval,
        flowtests,
        gates,
        gc,
        interchange,
        mcp_stdio,
        memory,
        optimize,
        run,
        runs,
        serve,
        starter,
        stats,
        threads,
        validate,
    )

    # a function: mypy checks its body once the commands' modules, which import this one, have their types
    def _members() -> tuple[click.Command, ...]:
        return (
            validate.validate,
            diff.diff,
            catalog.flows,
            catalog.blocks,
            starter.init,
            flowtests.test_,
            eval.eval_,
            optimize.optimize,
            run.run,
            run.resume,
            run.graph,
            runs.runs,
            stats.stats_cli,
            gates.gates_cli,
            threads.threads_cli,
            memory.memory,
            serve.serve,
            serve.watch,
            serve.schedules,
            db.db,
            gc.gc,
            interchange.import_group,
            interchange.export_group,
            compose.compose_cli,
            mcp_stdio.mcp,
        )


# The import names of the `run` extra's distributions (pyproject.toml), and starlette, which engine/serve
# imports and FastAPI brings, and opentelemetry, whose API FastAPI brings too (the `otel` extra adds its SDK;
# engine/telemetry says itself when that is missing) (tests/test_packaging.py keeps them in step with the
# extra and the engine's imports). A command that fails to import one of them needs the runtime, which is
# not installed.
RUNTIME_MODULES = frozenset(
    {
        "langgraph",
        "aiosqlite",
        "langchain_core",
        "langchain_openai",
        "openai",
        "watchfiles",
        "fastapi",
        "uvicorn",
        "sse_starlette",
        "httpx",
        "anyio",
        "starlette",
        "prometheus_client",
        "opentelemetry",
    }
)
# modules of the optional extras a command may need for what blockyard.yaml or the environment asks:
# a state database on Postgres (`database:`, BLOCKYARD_DATABASE_URL) needs psycopg and LangGraph's saver
EXTRA_MODULES = {
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "psycopg_binary": "postgres",
    "langgraph.checkpoint.postgres": "postgres",
    "langgraph.store.postgres": "postgres",
    "mcp": "mcp",
}  # `blockyard mcp` and /mcp of `blockyard serve` (docs/mcp.md)


class RuntimeMissing(UsageError):
    """A command needs the engine's runtime (LangGraph, the model clients, the server), and this
    installation is the core only (exit 2: what the user installed does not offer the command)."""

    def __init__(self, command: str) -> None:
        super().__init__(
            f"{command} needs the engine's runtime, and {extras.missing(extras.RUNTIME)}"
        )


class ExtraMissing(UsageError):
    """What the yard asks for needs an optional extra that is not installed (exit 2)."""

    def __init__(self, command: str, extra: str) -> None:
        why = (
            "its state database is on Postgres"
            if extra == "postgres"
            else f"it needs the '{extra}' extra"
        )
        super().__init__(f"{command}: {why}, and {extras.missing(extra)}")


def _extra_of(module: str) -> str | None:
    return next(
        (
            extra
            for name, extra in EXTRA_MODULES.items()
            if module == name or module.startswith(name + ".")
        ),
        None,
    )


class _Commands(Group):
    """The top-level group: loads a command's module when the command is asked for, and turns a
    runtime dependency that is not installed into RuntimeMissing, for every command at once."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as exc:
            # the innermost command that ran (`blockyard db copy`), else the one asked for
            command = ctx.meta.get(RUNNING, "blockyard")
            extra = _extra_of(exc.name or "")
            if extra is not None:
                raise ExtraMissing(command, extra) from None
            if (exc.name or "").partition(".")[0] not in RUNTIME_MODULES:
                raise
            raise RuntimeMissing(command) from None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args:  # its module is imported now, and may need the runtime already
            ctx.meta[RUNNING] = f"blockyard {args[0]}"
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, name = where.split(":")
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command)
        return command


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
# the version of the engine's code: the distributions (`blockyard-core`, `blockyard`) take theirs from it
@click.version_option(version=__version__, prog_name="blockyard")
def cli() -> None:
    """Blockyard: declarative LLM agent flows in YAML, compiled to LangGraph."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and map every outcome to an exit code. Without `argv` it is the
    process's own command (the `blockyard` script, `python -m engine`), which starts without the
    garbage collector's full collections (engine/cli/startup.py); with `argv` (a test) it runs as is."""
    if argv is None:
        startup.begin()
    try:
        _check_arguments(sys.argv[1:] if argv is None else argv)
        cli.main(args=argv, prog_name="blockyard", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return 130
    except click.UsageError as exc:
        exc.show()
        return 2
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except ValidationFailed as exc:  # its message is diagnostic lines, each already saying "error"
        click.echo(str(exc), err=True)
        return exc.exit_code
    except BlockyardError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception:
        return _crash()
    return 0


def _check_arguments(args: list[str]) -> None:
    """Refuse arguments that are not valid text: Python decodes bytes that are not UTF-8 to lone
    surrogates (surrogateescape), which no database, log or terminal can write back."""
    for position, arg in enumerate(args):
        problem = text_problem(arg)
        if problem is None:
            continue
        if arg.startswith("-"):
            option = arg.partition("=")[0]
        elif position > 0 and args[position - 1].startswith("-"):
            option = args[position - 1].partition("=")[0]
        else:
            option = f"argument {position + 1}"
        if text_problem(option) is not None:
            option = f"argument {position + 1}"
        raise UsageError(f"{option}: not valid text: it {problem}")


def _crash() -> int:
    log = Path(tempfile.gettempdir()) / "blockyard-crash.log"
    try:
        log.write_text(traceback.format_exc(), encoding="utf-8")
        where = f"; details in {log}"
    except OSError:
        where = ""
    exc = sys.exc_info()[1]
    click.echo(f"internal error: {type(exc).__name__}: {exc}{where} (please report it)", err=True)
    return 4  # not 3, which means "paused for approval"


if __name__ == "__main__":
    raise SystemExit(main())
