"""Reading a yard's files without ever leaving the yard.

A yard comes from a repository, and a pull request can store a symbolic link: `flows/x.yaml`
pointing at a token file elsewhere on the disk would otherwise be read and quoted back in a
diagnostic, which CI prints as an annotation. So a file of the yard is read only when its real
path (every link resolved) lies inside the yard: its root, plus any folder that blockyard.yaml's
`paths:` deliberately places outside it. A link that leaves the yard, dangles or loops is refused
without opening its target, and reported by the name of the link, never of its target (the
target's path can be sensitive too). Only regular files are read: a FIFO would block forever and
a device never ends. Reads stop at a byte limit whatever size the file claims (/proc files claim 0).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LINK_CODE = "BY008"  # a link that resolves outside the yard, dangles or loops
SPECIAL_CODE = "BY009"  # not a regular file

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)
# O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused right after, by fstat)
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 64 * 1024


class Refused(Exception):
    """A file that is not read. The message names the path as the user knows it, never a link's target."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TooLarge(Exception):
    """More than the limit; `size` is the size the file claims, or None when it grew while being read."""

    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


def located(path: Path) -> Path:
    """`path` absolute, with the links of its folders resolved but not a link at its own name:
    the place a user means by it, safe to show (resolving the name would name a link's target)."""
    absolute = Path(os.path.abspath(path))
    if absolute.parent == absolute:
        return absolute
    return Path(os.path.realpath(absolute.parent)) / absolute.name


class Locations:
    """`located` for the many files of one piece of work (loading a yard): each folder is resolved
    once, not once per file (resolving walks every folder of the path). For names shown and compared
    only: reading a file resolves it again, whole (`Bounds.resolve`)."""

    def __init__(self) -> None:
        self._folders: dict[str, Path] = {}

    def __call__(self, path: Path) -> Path:
        folder, name = os.path.split(os.path.abspath(path))
        if not name:  # the file system's root
            return Path(folder)
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = Path(os.path.realpath(folder))
        return real / name


@dataclass(frozen=True)
class Bounds:
    """The real folders a yard's files may resolve into."""

    roots: tuple[Path, ...]
    place: str = "the yard"  # how messages name them

    @classmethod
    def of(cls, root: Path, *folders: str | Path) -> Bounds:
        """The yard at `root`, plus those `folders` (relative to it) that are written as lying outside it.

        A folder inside the yard counts only as far as it really stays inside: `flows/` being a link
        to /etc adds nothing. One written outside (`paths: {blocks: ../common}`) is the yard owner's
        explicit choice, visible in blockyard.yaml.
        """
        base = Path(os.path.abspath(root))
        roots = [Path(os.path.realpath(base))]
        for folder in folders:
            lexical = Path(os.path.normpath(base / folder))
            if not lexical.is_relative_to(base):
                real = Path(os.path.realpath(lexical))
                if real not in roots:
                    roots.append(real)
        return cls(tuple(roots))

    def contains(self, real: Path) -> bool:
        return any(real == root or real.is_relative_to(root) for root in self.roots)

    def resolve(self, path: Path, shown: str | None = None) -> Path:
        """The real path of `path`; Refused when it leaves the yard, dangles or loops.

        A missing file that is no link raises the OSError of the missing file (not a link problem).
        """
        name = shown or str(path)
        try:
            real = Path(os.path.realpath(path, strict=True))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Refused(
                    LINK_CODE,
                    f"symbolic link {name} loops (it never resolves to a file); it is not read",
                ) from None
            if os.path.islink(path):
                raise Refused(
                    LINK_CODE,
                    f"symbolic link {name} points at nothing (its target does not "
                    "exist); it is not read",
                ) from None
            raise
        if not self.contains(real):
            what = (
                f"symbolic link {name} resolves"
                if os.path.islink(path)
                else f"{name} resolves, through a link,"
            )
            raise Refused(LINK_CODE, f"{what} outside {self.place}; it is not read")
        return real


def argument_bounds(path: Path, root: Path) -> Bounds | None:
    """The bounds for a file named on the command line (--inputs-file, --examples, a test file).

    Written inside the yard, it is one of the yard's files, so a link there must not lead out
    (the repository may have planted it); named anywhere else, it is the user's own choice.
    """
    written = Path(os.path.abspath(path))
    yard = (Path(os.path.abspath(root)), Path(os.path.realpath(root)))
    if any(written == base or written.is_relative_to(base) for base in yard):
        return Bounds.of(root)
    return None


def read_bytes(
    path: Path,
    limit: int,
    bounds: Bounds | None = None,
    shown: str | None = None,
    *,
    pipes: bool = False,
) -> bytes:
    """At most `limit` bytes of the regular file `path`, which must stay inside `bounds` when given.

    `pipes` also accepts a pipe: for a file the user named on the command line outside any yard
    (`--inputs-file <(make-inputs)`), read until its writer closes it.
    Raises Refused (outside the yard, not a regular file), TooLarge, or OSError (cannot be read).
    """
    name = shown or str(path)
    target = bounds.resolve(path, name) if bounds is not None else path
    info = os.stat(target)
    pipe = pipes and stat.S_ISFIFO(info.st_mode)
    if not pipe:
        _check_regular(info, name)
    if info.st_size > limit:
        raise TooLarge(info.st_size)
    flags = _OPEN_FLAGS & ~getattr(os, "O_NONBLOCK", 0) if pipe else _OPEN_FLAGS
    try:
        # the resolved path is opened without following a link there: one swapped in since is refused
        handle = os.open(target, flags | (_NOFOLLOW if bounds is not None else 0))
    except OSError as exc:
        if bounds is not None and exc.errno == errno.ELOOP:
            raise Refused(
                LINK_CODE, f"{name} became a symbolic link while being opened; it is not read"
            ) from None
        raise
    try:
        opened = os.fstat(handle)
        if not pipe:
            _check_regular(opened, name)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise Refused(LINK_CODE, f"{name} was replaced while being opened; it is not read")
        return _read_at_most(handle, limit)
    finally:
        os.close(handle)


def _check_regular(info: os.stat_result, name: str) -> None:
    if stat.S_ISREG(info.st_mode):
        return
    kind = next((text for test, text in _KINDS if test(info.st_mode)), "a special file")
    raise Refused(
        SPECIAL_CODE, f"{name} is {kind}, not a regular file; only regular files are read"
    )


def _read_at_most(handle: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(handle, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:  # the file grew, or claimed a size it does not have
            raise TooLarge(None)


@dataclass
class Listing:
    """The files found in a folder, and the entries refused on the way (links out, special files)."""

    files: list[Path] = field(default_factory=list)
    refused: list[tuple[Path, Refused]] = field(default_factory=list)


def list_files(
    folder: Path, bounds: Bounds, wanted: Callable[[str], bool], show: Callable[[Path], str] = str
) -> Listing:
    """Every file under `folder` whose name is `wanted`, sorted, found without following any link.

    A wanted name that is a link staying inside the yard is listed (reading it resolves it again);
    one that leaves the yard, dangles or loops is refused, and so is a link to a folder outside the
    yard (its files would be read otherwise). Links to folders inside the yard are not followed, so
    nothing is listed twice and no loop is walked. Wanted names that are FIFOs, devices or sockets
    are refused. `show` gives the name a refusal uses.
    """
    listing = Listing()
    if not os.path.lexists(folder):
        return listing
    try:
        real = bounds.resolve(folder, show(folder))
    except Refused as refusal:
        listing.refused.append((folder, refusal))
        return listing
    except OSError:
        return listing
    if real.is_dir():
        _walk(folder, bounds, wanted, show, listing)
    listing.files.sort()
    listing.refused.sort(key=lambda item: item[0])
    return listing


def _walk(
    folder: Path,
    bounds: Bounds,
    wanted: Callable[[str], bool],
    show: Callable[[Path], str],
    listing: Listing,
) -> None:
    try:
        with os.scandir(folder) as found:
            entries = sorted(found, key=lambda entry: entry.name)
    except OSError:  # unreadable folder: as before, it holds nothing
        return
    for entry in entries:
        path = folder / entry.name
        try:
            if entry.is_symlink():
                _link(path, bounds, wanted(entry.name), show, listing)
            elif entry.is_dir(follow_symlinks=False):
                _walk(path, bounds, wanted, show, listing)
            elif wanted(entry.name):
                if entry.is_file(follow_symlinks=False):
                    listing.files.append(path)
                else:
                    _check_regular(entry.stat(follow_symlinks=False), show(path))
        except Refused as refusal:
            listing.refused.append((path, refusal))
        except OSError:  # vanished meanwhile
            continue


def _link(
    path: Path, bounds: Bounds, wanted: bool, show: Callable[[Path], str], listing: Listing
) -> None:
    try:
        real = bounds.resolve(path, show(path))
    except Refused:
        if wanted or _points_at_folder(path):
            raise
        return
    if wanted and not real.is_dir():
        listing.files.append(path)


def _points_at_folder(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False
