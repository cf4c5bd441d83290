"""docs/reference/cli.md: every `blockyard` command, its arguments and options, from the click commands
themselves (engine/cli/__init__.py registers them in COMMANDS)."""

from __future__ import annotations

from collections.abc import Iterator

import click

from engine.cli import cli
from engine.reference.markdown import code, from_docs, header, paragraphs, slug, table

INTRO = (
    "Every command of `blockyard`, with its arguments and options as `blockyard COMMAND --help` prints "
    "them. Exit codes and what each command prints: [cli.md](../cli.md) ([exit codes](../cli.md#exit-codes)); "
    "a guided start: [the tutorial](../tutorial.md). Every command takes `-h`/`--help`; `blockyard --version` "
    "prints the version."
)


def _commands(
    group: click.Group, parent: click.Context
) -> Iterator[tuple[click.Command, click.Context]]:
    """Each command below `group` (subcommands after their group), with its context, in name order."""
    for name in group.list_commands(parent):
        command = group.get_command(parent, name)
        if command is None or command.hidden:
            continue
        context = click.Context(command, info_name=name, parent=parent)
        yield command, context
        if isinstance(command, click.Group):
            yield from _commands(command, context)


def _path(context: click.Context) -> str:
    return context.command_path


def _params(command: click.Command, context: click.Context) -> list[list[str]]:
    rows: list[list[str]] = []
    for param in command.get_params(context):
        if isinstance(param, click.Option) and "--help" in param.opts:
            continue
        if isinstance(param, click.Argument):
            what = param.make_metavar(context)
            notes = ["argument, required" if param.required else "argument, optional"]
            if param.nargs == -1:
                notes.append("any number")
            rows.append([code(what), ", ".join(notes)])
            continue
        record = param.get_help_record(context)
        if record is None:  # a hidden option
            continue
        names, help_text = record
        rows.append([code(names), from_docs(help_text)])
    return rows


def page() -> str:
    root = click.Context(cli, info_name="blockyard")
    commands = list(_commands(cli, root))
    lines = header("Command line reference", "the click commands of engine/cli/", INTRO)
    lines += ["| command | what it does |", "| --- | --- |"]
    for command, context in commands:
        title = _path(context)
        summary = command.get_short_help_str(limit=200)
        lines.append(
            f"| [`{title}`](#{slug(title)}) | {from_docs(summary).replace('|', chr(92) + '|')} |"
        )
    lines.append("")
    for command, context in commands:
        lines += [
            f"## {_path(context)}",
            "",
            "```",
            command.get_usage(context).removeprefix("Usage: "),
            "```",
            "",
        ]
        lines += [from_docs(line) for line in paragraphs(command.help or "")]
        rows = _params(command, context)
        if rows:
            lines += table(["argument or option", "meaning"], rows)
        subs = [(sub, subcontext) for sub, subcontext in commands if subcontext.parent is context]
        if subs:
            lines += [
                "Its commands: "
                + ", ".join(
                    f"[`{_path(subcontext)}`](#{slug(_path(subcontext))})" for _, subcontext in subs
                ),
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"
