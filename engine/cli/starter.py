"""`blockyard init [DIR]`: write a small yard that validates and runs offline, ready to edit.

Nothing is ever overwritten: if any file of the starter exists, nothing is written at all. The
JSON Schemas the package ships are copied into DIR/schemas/ (one already there is kept), and the
files name them by relative path, so editor completion works offline and matches the installed
version (a URL would need the network, and could describe another version).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from engine.cli.options import Command
from engine.definitions.schema import schema_dir

SCHEMAS_FOLDER = "schemas"


def _schema_line(name: str, depth: int) -> str:
    # editors with the YAML language server read this line and offer completion and hover docs;
    # the path is relative to the file that holds the line
    return f"# yaml-language-server: $schema={'../' * depth}{SCHEMAS_FOLDER}/{name}.schema.json\n"


CONFIG = (
    _schema_line("config", 0)
    + """\
# Project settings. Every key is optional; see docs/cli.md and docs/models.md.
models:
  # `default` is the profile a block uses when it names none. The mock provider is a
  # deterministic offline model that returns schema-valid outputs: good for a first run
  # and for tests. To use a real model, replace it with for example:
  #   default: {provider: openai, name: gpt-4o-mini, api_key_env: OPENAI_API_KEY}
  # (any OpenAI-compatible server works: add base_url: http://localhost:11434/v1)
  default:
    provider: mock
"""
)

BLOCK = (
    _schema_line("block", 1)
    + """\
block: greet
version: 1
description: Write a one-line greeting for someone.
kind: llm
inputs:
  name: {type: string, description: Who to greet.}
outputs:
  greeting: {type: string, description: The greeting.}
prompt:
  system: You write warm, short greetings.
  user: "Write a one-line greeting for {{ name }}."
category: text
tags: [starter]
"""
)

FLOW = (
    _schema_line("flow", 1)
    + """\
flow: hello
version: 1
description: Greet someone by name.
inputs:
  name: {type: string, default: World, description: Who to greet.}
outputs: [greeting]
steps:
  - id: greet
    uses: greet
    with: {name: "{{ inputs.name }}"}
"""
)

FILES: dict[str, str] = {
    "blockyard.yaml": CONFIG,
    "blocks/greet.yaml": BLOCK,
    "flows/hello.yaml": FLOW,
}
GITIGNORE = (
    "# run state, checkpoints and memory of `blockyard run` / `blockyard serve`\n.blockyard/\n"
)


def init_command(directory: Path) -> int:
    """Write the starter yard into `directory` (created if needed); 1 if any of its files exists."""
    if directory.exists() and not directory.is_dir():
        sys.stderr.write(f"error: {directory} exists and is not a folder\n")
        return 1
    existing = [name for name in FILES if (directory / name).exists()]
    if existing:
        sys.stderr.write(
            f"error: {', '.join(str(directory / name) for name in existing)} already "
            f"exist{'s' if len(existing) == 1 else ''}; `blockyard init` never overwrites files "
            "(choose an empty folder: blockyard init DIR)\n"
        )
        return 1
    try:
        for name, text in FILES.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open(
                "x", encoding="utf-8"
            ) as handle:  # "x": a file appearing meanwhile is not clobbered
                handle.write(text)
        schemas = _write_schemas(directory / SCHEMAS_FOLDER)
        ignore = directory / ".gitignore"
        wrote_ignore = not ignore.exists()
        if wrote_ignore:
            ignore.write_text(GITIGNORE, encoding="utf-8")
    except OSError as exc:
        sys.stderr.write(
            f"error: cannot write the starter yard in {directory}: {exc.strerror or exc}\n"
        )
        return 1
    written = [*FILES, *schemas, *([".gitignore"] if wrote_ignore else [])]
    lines = [f"Created a yard in {directory}:", *(f"  {name}" for name in written)]
    if not wrote_ignore:
        lines.append("  (add .blockyard/ to your .gitignore: it holds run state)")
    here = "" if directory.resolve() == Path.cwd().resolve() else f" --root {directory}"
    lines += [
        "Next:",
        f"  blockyard validate{here}",
        f"  blockyard run hello{here} --input name=Ada",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _write_schemas(folder: Path) -> list[str]:
    """Copy the shipped schemas into the yard; a file already there is kept. Returns what was written."""
    written: list[str] = []
    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted(schema_dir().glob("*.schema.json")):
        name = source.name
        try:
            with (folder / name).open(
                "xb"
            ) as handle:  # "x": never through a link, never over a file
                handle.write(source.read_bytes())
        except FileExistsError:
            continue
        written.append(f"{SCHEMAS_FOLDER}/{name}")
    return written


# ---- the commands ---------------------------------------------------------------------------------


@click.command("init", cls=Command)
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
def init(directory: Path | None) -> None:
    """Write a starter yard (blockyard.yaml, a block and a flow)."""
    raise SystemExit(init_command(directory or Path.cwd()))
