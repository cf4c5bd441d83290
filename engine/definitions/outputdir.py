"""The folder a run's file tools write to: the flow's `output_dir`, `blockyard run --output` or the
HTTP body's `output_dir` (in that order of precedence: the run's choice wins), else the run's own
workspace under the state folder (.blockyard/workspaces/<run>/).

A named folder is relative to the yard and stays inside it: no absolute path, no `..`, and — checked
when a run starts, and again by the file tools on every call — no symbolic link that leads out.

A run writes only where the engine never reads: what a model writes must not become a definition,
code, a prompt or configuration of the next run. So an output folder may not overlap (be, lie
inside, or contain) anything the engine reads (`reserved`): the yard root itself, blockyard.yaml,
blocks/, flows/, prompts/, schemas/, evals/, .blockyard/, .git/, the folders `paths:` names (blocks,
flows, the state database's folder, the code folder `paths.code` — or, when that is the yard root,
the modules its tools import) and the folder of every prompt file. The same rule, from here, judges
the flow's `output_dir` (BY435), `blockyard run --output`, the HTTP body's `output_dir` and a TaskPlan
run's; when a run starts it is checked again on the real paths, every link resolved.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath, PureWindowsPath

from engine.core.errors import UsageError
from engine.core.values import text_problem
from engine.definitions.files import Bounds
from engine.spec import BlockSpec, ConfigSpec, ModelBlock

# what the engine reads in every yard, whatever blockyard.yaml says: (path relative to the yard, what it is)
FIXED: tuple[tuple[str, str], ...] = (
    (".blockyard", "the state folder"),
    (".git", "the repository"),
    ("blockyard.yaml", "the yard's configuration"),
    ("blocks", "the block folder"),
    ("flows", "the flow folder"),
    ("prompts", "the prompt folder"),
    ("schemas", "the JSON Schemas"),
    ("evals", "the evaluations folder"),
)

Reserved = tuple[tuple[str, str], ...]  # (normal path relative to the yard, what it is)


def reserved(config: ConfigSpec | None = None, prompt_files: Iterable[str] = ()) -> Reserved:
    """What the engine reads in a yard with `config` whose blocks use `prompt_files` (names relative to
    the yard): the paths an output folder may not overlap."""
    found: list[tuple[str, str]] = list(FIXED)
    if config is not None:
        paths = config.paths
        found += [
            (paths.blocks, "the block folder, paths.blocks"),
            (paths.flows, "the flow folder, paths.flows"),
        ]
        state = PurePosixPath(paths.state)
        found.append(
            (
                str(state.parent) if _parts(str(state.parent)) else paths.state,
                "the state database's folder, paths.state",
            )
        )
        if _parts(paths.code):
            found.append((paths.code, "the yard's code folder, paths.code"))
        else:  # the code folder is the yard root: the modules its tools import are the code
            for decl in config.tools.values():
                top = decl.import_.partition(":")[0].split(".")[0]
                found += [
                    (top, f"the module '{top}' of the yard's tools"),
                    (f"{top}.py", f"the module '{top}' of the yard's tools"),
                ]
    for name in prompt_files:
        folder = PurePosixPath(name).parent
        found.append(
            (str(folder), f"the folder of prompt file '{name}'")
            if _parts(str(folder))
            else (name, "a prompt file")
        )
    kept: dict[str, str] = {}
    for path, what in found:
        parts = _parts(path)
        outside = (
            PurePosixPath(path).is_absolute() or bool(PureWindowsPath(path).anchor) or ".." in parts
        )
        if parts and not outside:
            # a folder outside the yard (`../common`, `/var/db`) holds no output folder
            kept.setdefault("/".join(parts), what)
    return tuple(kept.items())


def prompt_files(blocks: Iterable[BlockSpec]) -> set[str]:
    """The prompt files these blocks name (`system_file`, `user_file`)."""
    return {
        name
        for block in blocks
        if isinstance(block, ModelBlock) and block.prompt is not None
        for name in (block.prompt.system_file, block.prompt.user_file)
        if name is not None
    }


def _parts(text: str) -> tuple[str, ...]:
    return tuple(
        part for part in PurePosixPath(text.replace("\\", "/")).parts if part not in (".", "/")
    )


def _overlaps(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """One path is the other or lies inside it (compared without case: a file system may ignore it)."""
    short = min(len(a), len(b))
    return [_folded(p) for p in a[:short]] == [_folded(p) for p in b[:short]]


def _folded(part: str) -> str:
    return part.rstrip(" .").casefold() or part  # Windows ignores a name's trailing dots and spaces


def overlap_problem(parts: tuple[str, ...], reserved_paths: Reserved) -> str | None:
    """Why the output folder `parts` overlaps what the engine reads, or None."""
    for path, what in reserved_paths:
        mine = tuple(path.split("/"))
        if not _overlaps(parts, mine):
            continue
        how = (
            "is"
            if len(parts) == len(mine)
            else "lies inside"
            if len(parts) > len(mine)
            else "contains"
        )
        return (
            f"it {how} {path}, {what}; a run writes only where the engine reads no definitions, code, "
            "prompts or configuration: name another folder, e.g. output"
        )
    return None


def output_dir_problem(text: str, reserved_paths: Reserved | None = None) -> str | None:
    """Why `text` cannot name an output folder of the yard whose engine reads `reserved_paths`
    (default: what every yard reads, `reserved()`), or None."""
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
    # a backslash separates folders on Windows: `flows\\x` is judged as flows/x wherever it is written
    return overlap_problem(
        tuple(part for part in windows.parts if part != "."),
        reserved() if reserved_paths is None else reserved_paths,
    )


def normalized(text: str) -> str:
    """`./output/` -> `output`: how the folder is recorded with the run."""
    return PurePosixPath(*[part for part in PurePosixPath(text).parts if part != "."]).as_posix()


def resolve_output_dir(
    root: Path, text: str, what: str = "output_dir", reserved_paths: Reserved | None = None
) -> Path:
    """The folder `text` names in the yard at `root` whose engine reads `reserved_paths` (default:
    `reserved()`); UsageError when it is not one of the yard's, or overlaps what the engine reads —
    also through a symbolic link, judged on the real paths."""
    reserved_paths = reserved() if reserved_paths is None else reserved_paths
    problem = output_dir_problem(text, reserved_paths)
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
        for path, means in reserved_paths:
            held = Path(os.path.realpath(base / path))
            if real == held or real.is_relative_to(held) or held.is_relative_to(real):
                raise UsageError(
                    f"{what} '{shown}' leads, through a symbolic link, to {path}, {means}; a run "
                    "writes only where the engine reads no definitions, code, prompts or configuration"
                )
    except (
        OSError,
        ValueError,
    ) as exc:  # a name too long for the file system, text it cannot encode
        raise UsageError(
            f"{what} '{shown}' cannot be a folder of the yard: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    return folder
