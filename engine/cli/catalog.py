"""`blockyard flows` and `blockyard blocks`: what a yard holds, as aligned tables.

Listing is for looking around, so it never fails on a broken file: what could not be loaded is
named on stderr (run `blockyard validate` for the details) and the rest is listed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command, root_of
from engine.core.diagnostics import did_you_mean
from engine.definitions.project import Project, is_builtin, load_project
from engine.spec.walk import walk_steps
from engine.validate.command import find_root, is_yard


def flows_command(root: Path) -> int:
    """Print NAME, VERSION, STEPS (nested ones included) and DESCRIPTION of every flow."""
    project = _load(root)
    rows = []
    for name in sorted(project.flows):
        spec = project.flows[name].spec
        steps = sum(1 for _ in walk_steps(spec.steps))
        rows.append([name, str(spec.version), str(steps), _first_line(spec.description)])
    if not rows:
        sys.stderr.write(f"no flows in {project.root / project.config.paths.flows}\n")
        return 0
    sys.stdout.write(table(["NAME", "VERSION", "STEPS", "DESCRIPTION"], rows))
    return 0


def blocks_command(root: Path, tag: str | None, category: str | None) -> int:
    """Print the newest version of every block (older versions in brackets), filtered by tag and category."""
    project = _load(root)
    rows = []
    tags: set[str] = set()
    categories: set[str] = set()
    for name in sorted(project.blocks):
        versions = project.blocks[name]
        # built-in blocks (query_memory, ...) are in docs/memory.md
        if is_builtin(versions[max(versions)]):
            continue
        spec = versions[max(versions)].spec
        tags.update(spec.tags)
        if spec.category:
            categories.add(spec.category)
        if tag is not None and tag.lower() not in (t.lower() for t in spec.tags):
            continue
        if category is not None and (spec.category or "").lower() != category.lower():
            continue
        older = sorted(versions)[:-1]
        version = str(spec.version) + (f" ({', '.join(map(str, older))})" if older else "")
        rows.append(
            [
                name,
                version,
                spec.kind,
                spec.category or "",
                ", ".join(spec.tags),
                _first_line(spec.description),
            ]
        )
    if not rows:
        sys.stderr.write(_nothing_found(project, tag, category, tags, categories) + "\n")
        return 0
    sys.stdout.write(table(["NAME", "VERSION", "KIND", "CATEGORY", "TAGS", "DESCRIPTION"], rows))
    return 0


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _load(root: Path) -> Project:
    if not is_yard(root):
        root = find_root(root) or root
    project = load_project(root)
    broken = sorted({d.file for d in project.diagnostics if d.severity == "error"})
    if broken:
        sys.stderr.write(
            f"warning: {len(broken)} file(s) could not be loaded and are not listed "
            f"(see `blockyard validate`): {', '.join(broken)}\n"
        )
    return project


def _nothing_found(
    project: Project, tag: str | None, category: str | None, tags: set[str], categories: set[str]
) -> str:
    if all(is_builtin(versions[max(versions)]) for versions in project.blocks.values()):
        return f"no blocks in {project.root / project.config.paths.blocks}"
    wanted = []
    if tag is not None:
        wanted.append(f"tag '{tag}'{_hint(tag, tags)}")
    if category is not None:
        wanted.append(f"category '{category}'{_hint(category, categories)}")
    return f"no blocks with {' and '.join(wanted)}"


def _hint(value: str, known: set[str]) -> str:
    # a value that exists but matched nothing in combination needs no suggestion
    return "" if value.lower() in {k.lower() for k in known} else did_you_mean(value, known)


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


# ---- the commands ---------------------------------------------------------------------------------


@click.command("flows", cls=Command)
@ROOT_OPTION
def flows(root: Path | None) -> None:
    """List the yard's flows."""
    raise SystemExit(flows_command(root_of(root)))


@click.command("blocks", cls=Command)
@click.option("--tag", default=None, help="Only blocks with this tag.")
@click.option("--category", default=None, help="Only blocks of this category.")
@ROOT_OPTION
def blocks(tag: str | None, category: str | None, root: Path | None) -> None:
    """List the yard's blocks."""
    raise SystemExit(blocks_command(root_of(root), tag, category))
