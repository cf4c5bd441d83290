"""The folder a run's file tools write to: the flow's `output_dir`, `blockyard run --output` or the
HTTP body's `output_dir` (in that order of precedence: the run's choice wins), else the run's own
workspace under the state folder (.blockyard/workspaces/<run>/).

A named folder is relative to the yard and stays inside it: no absolute path, no `..`, and — checked
when a run starts, and again by the file tools on every call — no symbolic link that leads out.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from engine.errors import UsageError
from engine.values import text_problem
from engine.yardfiles import Bounds

RESERVED = (".blockyard", ".git")  # the state database and the repository: never a run's files


def output_dir_problem(text: str) -> str | None:
    """Why `text` cannot name an output folder of the yard, or None."""
    if not text.strip():
        return "it is empty"
    if "\x00" in text:
        return "it holds a NUL character"
    problem = text_problem(text)
    if problem is not None:
        return f"the name {problem}"
    posix, windows = PurePosixPath(text), PureWindowsPath(text)
    if posix.is_absolute() or windows.drive or windows.root:
        return "it is absolute; name a folder relative to the yard, e.g. output"
    if ".." in posix.parts or ".." in windows.parts:
        return "it contains '..'; the folder must stay inside the yard"
    parts = [part for part in posix.parts if part != "."]
    if not parts:
        return "it is the yard itself; name a folder inside it, e.g. output"
    if parts[0] in RESERVED:
        return f"'{parts[0]}' is not for a run's files"
    return None


def normalized(text: str) -> str:
    """`./output/` -> `output`: how the folder is recorded with the run."""
    return PurePosixPath(*[part for part in PurePosixPath(text).parts if part != "."]).as_posix()


def resolve_output_dir(root: Path, text: str, what: str = "output_dir") -> Path:
    """The folder `text` names in the yard at `root`; UsageError when it is not one of the yard's."""
    problem = output_dir_problem(text)
    shown = text if text.isprintable() and text_problem(text) is None else repr(text)[1:-1]
    if problem is not None:
        raise UsageError(f"{what} '{shown}': {problem}")
    base = Path(os.path.abspath(root))
    folder = base / normalized(text)
    try:
        real = Path(os.path.realpath(folder))  # the part that exists, links resolved
        if not Bounds.of(base).contains(real):
            raise UsageError(f"{what} '{shown}' leads outside the yard through a symbolic link")
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{what} '{shown}' is a file, not a folder")
    except (OSError, ValueError) as exc:  # a name too long for the file system, text it cannot encode
        raise UsageError(f"{what} '{shown}' cannot be a folder of the yard: {getattr(exc, 'strerror', None) or exc}") \
            from None
    return folder
