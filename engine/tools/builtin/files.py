"""read_file, write_file, list_files: confined to the run's workspace folder.

A path must be relative, without `..`, and must still be inside the workspace once every
symlink is resolved; reads, writes and listings are bounded. A workspace named by the flow or
the run (`output_dir`, engine/definitions/outputdir.py) must itself stay inside the yard: a link planted in
its place since the run started is refused on every call. Each write is reported to the
listener set for the block that runs (`writes`): the step's `file_written` event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PurePosixPath, PureWindowsPath

from engine.core.values import JsonDict
from engine.tools.errors import ToolError
from engine.tools.tool import Tool

READ_LIMIT = 1_000_000  # bytes returned by read_file
WRITE_LIMIT = 1_000_000  # bytes accepted by write_file
LIST_LIMIT = 1_000  # entries returned by list_files


# (path relative to the workspace, bytes written): set around a block's execution (engine/compile/blockstep.py)
_WRITTEN: ContextVar[Callable[[str, int], None] | None] = ContextVar(
    "blockyard_file_written", default=None
)


@contextmanager
def writes(listener: Callable[[str, int], None]) -> Iterator[None]:
    """Call `listener(path, bytes)` for each file write_file writes inside (also in worker threads)."""
    token = _WRITTEN.set(listener)
    try:
        yield
    finally:
        _WRITTEN.reset(token)


class Workspace:
    """Resolves tool paths inside one folder, refusing every way out."""

    def __init__(self, root: Path | None, confine: Path | None = None) -> None:
        self.root = root
        self.confine = confine  # the yard a named output folder must stay in

    def resolve(self, tool: str, path: str) -> Path:
        if self.root is None:
            raise ToolError(f"tool '{tool}': this run has no workspace folder")
        if not path or "\x00" in path:
            raise ToolError(f"tool '{tool}': invalid path {path!r}")
        posix, windows = PurePosixPath(path), PureWindowsPath(path)
        if posix.is_absolute() or windows.drive or windows.root:
            raise ToolError(
                f"tool '{tool}': path '{path}' is absolute; use a path relative to the workspace"
            )
        if ".." in posix.parts or ".." in windows.parts:
            raise ToolError(
                f"tool '{tool}': path '{path}' contains '..'; it must stay inside the workspace"
            )
        base = self.root.resolve()
        if self.confine is not None and not base.is_relative_to(self.confine.resolve()):
            raise ToolError(
                f"tool '{tool}': the output folder leads outside the yard (through a symlink)"
            )
        target = (base / path).resolve()
        if target != base and not target.is_relative_to(base):
            raise ToolError(
                f"tool '{tool}': path '{path}' leads outside the workspace (through a symlink)"
            )
        return target

    def relative(self, target: Path) -> str:
        assert self.root is not None
        return target.relative_to(self.root.resolve()).as_posix()


def file_tools(workspace: Path | None, confine: Path | None = None) -> list[Tool]:
    """The three file tools bound to one workspace (None: they refuse to run), which must stay
    inside `confine` when given."""
    space = Workspace(workspace, confine)

    def read_file(path: str, max_bytes: int = READ_LIMIT) -> JsonDict:
        target = space.resolve("read_file", path)
        if not target.is_file():
            raise ToolError(f"tool 'read_file': no file '{path}' in the workspace")
        limit = min(max_bytes, READ_LIMIT)
        with target.open("rb") as handle:
            data = handle.read(limit + 1)
        return {
            "path": space.relative(target),
            "content": data[:limit].decode("utf-8", errors="replace"),
            "truncated": len(data) > limit,
        }

    def write_file(path: str, content: str, append: bool = False) -> JsonDict:
        target = space.resolve("write_file", path)
        data = content.encode("utf-8")
        if len(data) > WRITE_LIMIT:
            raise ToolError(
                f"tool 'write_file': content is {len(data)} bytes; the limit is {WRITE_LIMIT}"
            )
        if target.is_dir():
            raise ToolError(f"tool 'write_file': '{path}' is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("ab" if append else "wb") as handle:
            handle.write(data)
        written = space.relative(target)
        listener = _WRITTEN.get()
        if listener is not None:
            listener(written, len(data))
        return {"path": written, "bytes": len(data)}

    def list_files(path: str = ".", recursive: bool = False) -> JsonDict:
        target = space.resolve("list_files", path)
        if not target.exists():
            if space.root is not None and target == space.root.resolve():
                return {"entries": [], "truncated": False}  # nothing written yet
            raise ToolError(f"tool 'list_files': no folder '{path}' in the workspace")
        if not target.is_dir():
            raise ToolError(f"tool 'list_files': '{path}' is not a folder")
        entries: list[JsonDict] = []
        for found in _walk(target, recursive):
            if len(entries) == LIST_LIMIT:
                return {"entries": entries, "truncated": True}
            entries.append(_entry(space, found))
        return {"entries": entries, "truncated": False}

    return [
        Tool("read_file", "Read a text file of the workspace.", READ_PARAMETERS, read_file),
        Tool(
            "write_file",
            "Write (or append to) a text file of the workspace.",
            WRITE_PARAMETERS,
            write_file,
        ),
        Tool("list_files", "List the files of a workspace folder.", LIST_PARAMETERS, list_files),
    ]


def _walk(folder: Path, recursive: bool) -> Iterator[Path]:
    """Entries in sorted order, each folder followed by its contents; symlinked folders are not entered."""
    for entry in sorted(folder.iterdir()):
        yield entry
        if recursive and entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry, recursive)


def _entry(space: Workspace, path: Path) -> JsonDict:
    relative = space.relative(path)
    if path.is_symlink():
        return {"path": relative, "type": "link"}
    if path.is_dir():
        return {"path": relative, "type": "dir"}
    return {"path": relative, "type": "file", "size": path.stat().st_size}


_PATH = {"type": "string", "description": "Path relative to the workspace folder."}
READ_PARAMETERS: JsonDict = {
    "type": "object",
    "properties": {
        "path": _PATH,
        "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": READ_LIMIT,
            "description": "Read at most this many bytes.",
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}
WRITE_PARAMETERS: JsonDict = {
    "type": "object",
    "properties": {
        "path": _PATH,
        "content": {"type": "string", "description": "Text to write (UTF-8)."},
        "append": {"type": "boolean", "description": "Append instead of replacing."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}
LIST_PARAMETERS: JsonDict = {
    "type": "object",
    "properties": {
        "path": {**_PATH, "default": "."},
        "recursive": {"type": "boolean", "description": "Include sub-folders."},
    },
    "additionalProperties": False,
}
