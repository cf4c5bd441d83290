"""Command-line parsing only: every command calls a function of the stage it belongs to.

This module is the one boundary that turns errors into exit codes: BlockyardError -> its
code with one clear message, Ctrl-C -> 130, anything else -> 4 with the traceback saved to a
log file for a bug report (never printed at the user).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT_OPTION = click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None,
                           help="The yard's root folder (default: the current directory).")


class Seconds(click.FloatRange):
    """A number of seconds in a range; NaN, which compares false with every bound, is refused too."""

    name = "seconds"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        seconds = super().convert(value, param, ctx)
        if seconds != seconds:  # NaN
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return float(seconds)


# Listing limits go into SQL (LIMIT ?), which takes 64-bit integers only.
LIMIT = click.IntRange(1, 100_000)


def _root(root: Path | None) -> Path:
    """The yard a command works on: --root or the current directory, refused when it is no yard."""
    from engine.project import require_yard

    return require_yard(root or Path.cwd())


def _named(exc: Exception, ctx: click.Context) -> None:
    """Tell a lock-wait error which command waited (`memory set`, `runs show`): several may run at once."""
    from engine.dbfile import StateLocked

    if isinstance(exc, StateLocked) and exc.command is None:
        words = ctx.command_path.split()[1:]  # without the program's name
        action = ctx.params.get("action")  # `memory ACTION`: the action is what the user ran
        exc.command = " ".join([*words, action] if isinstance(action, str) else words)


class _Command(click.Command):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            _named(exc, ctx)
            raise


class _Group(click.Group):
    command_class = _Command
    group_class = type  # subgroups (`runs`, `threads`) are _Groups too

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            _named(exc, ctx)  # the innermost command named it already, if it was a subcommand's
            raise


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="blockyard", prog_name="blockyard")
def cli() -> None:
    """Blockyard: declarative LLM agent flows in YAML, compiled to LangGraph."""


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github", "sarif"]), default="text",
              show_default=True, help="Report format.")
@ROOT_OPTION
def validate(paths: tuple[Path, ...], fmt: str, root: Path | None) -> None:
    """Check blocks, flows and blockyard.yaml: schema and semantics, every problem at once."""
    from engine.validate.command import validate_command

    raise SystemExit(validate_command(list(paths), fmt, root))


@cli.command()
@ROOT_OPTION
def flows(root: Path | None) -> None:
    """List the yard's flows."""
    from engine.catalog import flows_command

    raise SystemExit(flows_command(_root(root)))


@cli.command()
@click.option("--tag", default=None, help="Only blocks with this tag.")
@click.option("--category", default=None, help="Only blocks of this category.")
@ROOT_OPTION
def blocks(tag: str | None, category: str | None, root: Path | None) -> None:
    """List the yard's blocks."""
    from engine.catalog import blocks_command

    raise SystemExit(blocks_command(_root(root), tag, category))


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
def init(directory: Path | None) -> None:
    """Write a starter yard (blockyard.yaml, a block and a flow)."""
    from engine.starter import init_command

    raise SystemExit(init_command(directory or Path.cwd()))


@cli.command()
@click.argument("flow")
@click.option("--input", "-i", "inputs", multiple=True, metavar="K=V",
              help="An input; V is read as a YAML value (7 is a number, [1,2] a list).")
@click.option("--inputs-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A YAML or JSON mapping of inputs.")
@click.option("--run-id", default=None, help="Id for the run (default: generated).")
@click.option("--thread", default=None, help="Run inside an existing conversation thread.")
@click.option("--output", "output_dir", default=None, metavar="DIR",
              help="Folder of the yard the run's file tools write to (default: the flow's output_dir, "
                   "else .blockyard/workspaces/<run>/).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line.")
@ROOT_OPTION
def run(flow: str, inputs: tuple[str, ...], inputs_file: Path | None, run_id: str | None,
        thread: str | None, output_dir: str | None, as_json: bool, root: Path | None) -> None:
    """Run a flow by name."""
    from engine.runtime.commands import run_command

    raise SystemExit(run_command(_root(root), flow, list(inputs), inputs_file, run_id, thread, as_json,
                                 output_dir=output_dir))


@cli.command()
@click.argument("run_id")
@click.option("--approve", "decision", flag_value="approve", help="Approve the waiting gate.")
@click.option("--reject", "decision", flag_value="reject", help="Reject the waiting gate.")
@click.option("--reason", default=None, help="Why (recorded in the trace).")
@click.option("--set", "values", multiple=True, metavar="K=V", help="A gate field value.")
@click.option("--gate", default=None, help="Which gate, when several are waiting.")
@click.option("--as", "actor", default=None, help="Who decides (checked against the gate's approvers).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line.")
@ROOT_OPTION
def resume(run_id: str, decision: str | None, reason: str | None, values: tuple[str, ...],
           gate: str | None, actor: str | None, as_json: bool, root: Path | None) -> None:
    """Continue a run: decide a waiting gate, or go on after a crash or failure."""
    from engine.runtime.commands import resume_command

    raise SystemExit(resume_command(_root(root), run_id, decision, reason, list(values), gate, actor,
                                    as_json))


@cli.group(invoke_without_command=True)
@click.option("--flow", default=None, help="Only runs of this flow.")
@click.option("--status", default=None, help="Only runs with this status.")
@click.option("--limit", type=LIMIT, default=50, show_default=True, help="How many runs to show.")
@ROOT_OPTION
@click.pass_context
def runs(ctx: click.Context, flow: str | None, status: str | None, limit: int, root: Path | None) -> None:
    """List runs, newest first."""
    if ctx.invoked_subcommand is None:
        from engine.runtime.commands import runs_command

        raise SystemExit(runs_command(_root(root), flow, status, limit))


@runs.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@ROOT_OPTION
def runs_show(run_id: str, as_json: bool, root: Path | None) -> None:
    """Show one run: inputs, outputs, steps, error, waiting gates."""
    from engine.runtime.commands import show_command

    raise SystemExit(show_command(_root(root), run_id, as_json))


@cli.command()
@click.option("--flow", default=None, help="Only gates of this flow.")
@click.option("--expire", is_flag=True, help="Decide the gates whose timeout has passed (their on_timeout) "
                                             "and continue their runs; for cron, when no server runs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def gates(flow: str | None, expire: bool, as_json: bool, root: Path | None) -> None:
    """List the approval gates waiting for a decision."""
    from engine.runtime.gate_commands import gates_command

    raise SystemExit(gates_command(_root(root), flow, expire, as_json))


@cli.group(invoke_without_command=True)
@click.option("--flow", default=None, help="Only threads of this flow.")
@click.option("--limit", type=LIMIT, default=50, show_default=True, help="How many threads to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
@click.pass_context
def threads(ctx: click.Context, flow: str | None, limit: int, as_json: bool, root: Path | None) -> None:
    """List conversation threads (`blockyard run FLOW --thread ID`), most recent first."""
    if ctx.invoked_subcommand is None:
        from engine.runtime.thread_commands import threads_command

        raise SystemExit(threads_command(_root(root), flow, limit, as_json))


@threads.command("show")
@click.argument("thread_id")
@click.option("--json", "as_json", is_flag=True, help="Print the thread as JSON.")
@ROOT_OPTION
def threads_show(thread_id: str, as_json: bool, root: Path | None) -> None:
    """Show one thread: each turn, what was asked and what came back."""
    from engine.runtime.thread_commands import thread_show_command

    raise SystemExit(thread_show_command(_root(root), thread_id, as_json))


@cli.command()
@click.argument("block")
@click.option("--examples", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="A YAML or JSON list of examples: the block's inputs and the outputs expected for them.")
@click.option("--max-demos", default=4, show_default=True, help="Most demos bootstrapped from the examples.")
@click.option("--max-labeled", default=16, show_default=True, help="Most examples added as demos as they are.")
@ROOT_OPTION
def optimize(block: str, examples: Path, max_demos: int, max_labeled: int, root: Path | None) -> None:
    """Compile a smart block with DSPy (BootstrapFewShot); saves the program next to the block."""
    from engine.smart.optimize import optimize_command

    raise SystemExit(optimize_command(_root(root), block, examples, max_demos, max_labeled))


@cli.command()
@click.argument("flow")
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid", show_default=True)
@ROOT_OPTION
def graph(flow: str, fmt: str, root: Path | None) -> None:
    """Print a flow's graph."""
    from engine.runtime.commands import graph_command

    raise SystemExit(graph_command(_root(root), flow, fmt))


@cli.command()
@click.argument("action", type=click.Choice(["list", "get", "set", "delete"]))
@click.argument("scope")
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def memory(action: str, scope: str, key: str | None, value: str | None, as_json: bool, root: Path | None) -> None:
    """Look at and fix long-term memory: list|get|set|delete SCOPE [KEY] [VALUE]."""
    from engine.memory.commands import memory_command

    raise SystemExit(memory_command(_root(root), action, scope, key, value, as_json))


@cli.command()
@click.option("--host", default=None, help="Address to bind (default: blockyard.yaml server.host, 127.0.0.1); "
                                          "any non-loopback address needs BLOCKYARD_TOKEN.")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Port to bind (default: blockyard.yaml server.port, 8000).")
@click.option("--no-reload", "no_reload", is_flag=True, help="Don't watch the files for changes.")
@click.option("--grace", type=Seconds(0, 86_400), default=30.0, show_default=True,
              help="Seconds running runs get to finish at shutdown before they are interrupted.")
@ROOT_OPTION
def serve(host: str | None, port: int | None, no_reload: bool, grace: float, root: Path | None) -> None:
    """HTTP API, live events, web page, hot reload and schedules."""
    from engine.serve.commands import serve_command

    raise SystemExit(serve_command(_root(root), host, port, not no_reload, grace))


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: a report per save; json: one JSON object per save.")
@ROOT_OPTION
def watch(fmt: str, root: Path | None) -> None:
    """Re-validate on every save and print the problems (Ctrl-C to stop)."""
    from engine.serve.commands import watch_command

    raise SystemExit(watch_command(_root(root), fmt))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def schedules(as_json: bool, root: Path | None) -> None:
    """Print the scheduled flows and their next fire times."""
    from engine.serve.commands import schedules_command

    raise SystemExit(schedules_command(_root(root), as_json))


@cli.command("test")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@ROOT_OPTION
def test_(paths: tuple[Path, ...], root: Path | None) -> None:
    """Run flow tests (flows/*.test.yaml): scripted model replies, decisions, expected outputs."""
    from engine.flowtests import flowtest_command

    raise SystemExit(flowtest_command(_root(root), list(paths)))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and map every outcome to an exit code."""
    from engine.errors import BlockyardError, ValidationFailed

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
    from engine.errors import UsageError
    from engine.values import text_problem

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
    import tempfile
    import traceback

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
