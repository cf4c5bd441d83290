"""`blockyard validate [PATH...]`: load every yard the paths belong to, check it, report once.

PATH arguments may be files or folders anywhere inside a yard (pre-commit passes the changed
files). Each yard is always loaded whole, because a flow cannot be checked without the blocks it
uses; only the problems of the selected files are reported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.diagnostics import Diagnostic
from engine.core.errors import UsageError
from engine.definitions.files import Locations, located
from engine.definitions.project import Project, load_project
from engine.validate import semantic
from engine.validate.evalchecks import check_yard_evals
from engine.validate.report import REPORTERS, Report

CONFIG_FILE = "blockyard.yaml"


@dataclass
class Target:
    """One yard to check, and which of its files were asked for (None: all of them)."""

    root: Path
    selected: list[Path] | None = None
    problems: list[Diagnostic] = field(default_factory=list)
    files_checked: int = 0

    def wants(self, path: Path) -> bool:
        """Whether a file (by its own name, see `located`) was asked for. A link in the yard asked for
        selects what it names, and a file is selected through a link inside the yard that leads to it."""
        if self.selected is None:
            return True
        chosen = {place for given in self.selected for place in (given, given.resolve())}
        return any(
            candidate == place or candidate.is_relative_to(place)
            for candidate in {path, path.resolve()}
            for place in chosen
        )


Extra = Callable[[Project], list[Diagnostic]]
"""More checks of a loaded yard, handed down by the command line (the version policy of `--base`)."""


def validate_command(
    paths: list[Path], fmt: str, root: Path | None, extra: Extra | None = None
) -> int:
    """Validate, print the report in `fmt`, and return the exit code: 0 clean, 1 errors (2 is raised)."""
    reporter = REPORTERS.get(fmt)
    if reporter is None:
        raise UsageError(f"unknown format '{fmt}'; choose one of: {', '.join(REPORTERS)}")
    report = validate(paths, root, extra)
    reporter(report, sys.stdout, sys.stderr)
    return 0 if report.ok else 1


def validate(paths: list[Path], root: Path | None, extra: Extra | None = None) -> Report:
    """Check the yards that `paths` (or `root`, or the current directory) belong to; `extra` adds
    its findings for each yard."""
    cwd = Path.cwd().resolve()
    targets = plan(paths, root, cwd)
    diagnostics: set[Diagnostic] = set()
    checked = 0
    for target in targets:
        project = load_project(target.root)
        found = [
            *project.diagnostics,
            *semantic.check_project(project),
            *check_yard_evals(project),
            *(extra(project) if extra else []),
        ]
        shown = _display_base(target.root, cwd, several=len(targets) > 1)
        where = Locations()
        for d in found:
            if target.selected is None or target.wants(where(target.root / d.file)):
                diagnostics.add(_rebase(_one_line(d), shown, cwd))
        checked += sum(
            1 for path in project.files if target.selected is None or target.wants(where(path))
        )
    return Report(sorted(diagnostics), checked)


def plan(paths: list[Path], root: Path | None, cwd: Path) -> list[Target]:
    """Group the PATH arguments by the yard they belong to; raise UsageError for bad arguments."""
    if root is not None:
        base = (cwd / root).resolve()
        if not base.is_dir():
            raise UsageError(f"--root {root}: no such folder")
        if not is_yard(base):
            raise UsageError(
                f"--root {root}: not a yard (no {CONFIG_FILE}, blocks/ or flows/ in it)"
            )
        target = Target(base)
        for path in paths:
            resolved = _existing(path, cwd)
            if not (resolved == base or resolved.is_relative_to(base)):
                raise UsageError(f"{path} is not inside the yard {root}")
            if resolved != base:
                target.selected = [*(target.selected or []), resolved]
        return [target]
    if not paths:
        found = find_root(cwd)
        if found is None:
            raise UsageError(
                f"no yard here: no {CONFIG_FILE}, blocks/ or flows/ in {cwd} or above it; "
                "pass --root, or create one with `blockyard init`"
            )
        return [Target(found)]
    targets: dict[Path, Target] = {}
    for path in paths:
        resolved = _existing(path, cwd)
        found = find_root(resolved.parent if resolved.is_symlink() else resolved)
        if found is None:
            raise UsageError(
                f"{path} is not inside a yard (no {CONFIG_FILE}, blocks/ or flows/ in its "
                "folder or above it)"
            )
        target = targets.setdefault(found, Target(found, []))
        if resolved == found:
            target.selected = None  # the whole yard was asked for
        elif target.selected is not None:
            target.selected.append(resolved)
    return list(targets.values())


def is_yard(folder: Path) -> bool:
    return (
        (folder / CONFIG_FILE).is_file()
        or (folder / "blocks").is_dir()
        or (folder / "flows").is_dir()
    )


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds blockyard.yaml, blocks/ or flows/."""
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if is_yard(candidate):
            return candidate
    return None


def _existing(path: Path, cwd: Path) -> Path:
    """The argument as an absolute path; a link at its own name is kept (not resolved): it belongs to
    the yard it lies in, which reports it if it leads out (a link is never a way into another yard)."""
    where = located(cwd / path)
    if not os.path.lexists(where):
        raise UsageError(f"{path}: no such file or folder")
    return where


def _display_base(root: Path, cwd: Path, *, several: bool) -> str:
    """Prefix shown before yard-relative paths, so that every path printed can be opened from here.

    Run from the yard itself (the usual case) paths are relative to the yard; a yard below the
    current folder gets its relative prefix (GitHub annotations need repository-relative paths);
    a yard elsewhere keeps yard-relative paths, or absolute ones when several yards are reported.
    """
    if root == cwd:
        return ""
    if root.is_relative_to(cwd):
        return root.relative_to(cwd).as_posix() + "/"
    return root.as_posix() + "/" if several else ""


_BREAKS = str.maketrans(
    {"\r": "\\r", "\n": "\\n", "\x85": "\\x85", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _one_line(d: Diagnostic) -> Diagnostic:
    """Every format is line-based: a line break inside a message (e.g. from a quoted key) is escaped."""
    message = d.message.translate(_BREAKS)
    if message == d.message:
        return d
    return Diagnostic(d.file, d.line, d.col, d.code, message, d.severity)


def _rebase(d: Diagnostic, prefix: str, cwd: Path) -> Diagnostic:
    file = Path(d.file)
    if file.is_absolute():  # a folder outside the yard (`paths:` in blockyard.yaml)
        resolved = located(file)
        shown = (
            resolved.relative_to(cwd).as_posix()
            if resolved.is_relative_to(cwd)
            else resolved.as_posix()
        )
    elif prefix:
        shown = prefix + d.file
    else:
        return d
    return Diagnostic(shown, d.line, d.col, d.code, d.message, d.severity)
