"""The two sides of a `blockyard diff`: a git revision, a folder, or the working tree.

A git revision is read with git itself (`git ls-tree`, `git cat-file --batch`) into a temporary
folder: the work tree, the index and the stash are never touched. Only what the loader reads is
written: blockyard.yaml, the blocks and flows folders, and the prompt files the blocks name or
include (docs/review.md).
"""

from __future__ import annotations

import os
import posixpath
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engine.core.errors import UsageError
from engine.definitions.load import LoadError, load_bytes
from engine.definitions.prompts import PARTS, includes, normal

CONFIG_FILE = "blockyard.yaml"
WORKING_TREE = "working tree"
GIT_TIMEOUT = 60.0
MAX_PROMPT_ROUNDS = 16  # prompt files include others; pinning refuses deeper chains anyway


@dataclass(frozen=True)
class Side:
    """One side of a diff: where its yard is on disk now, and what to call it."""

    label: str  # `main (1a2b3c4)`, `working tree`, a folder as given
    root: Path
    revision: str | None = None  # the full commit id of a git revision
    exists: bool = True  # False: the yard did not exist at that revision (everything is added)


@dataclass
class _Entry:
    mode: str
    kind: str
    sha: str


@dataclass
class _Tree:
    """The files of the yard's folder at one commit: path relative to the yard -> entry."""

    files: dict[str, _Entry] = field(default_factory=dict)


def git(cwd: Path, *args: str, input_bytes: bytes | None = None) -> bytes:
    """Run git in `cwd`; UsageError with git's own message when it fails."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=input_bytes,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise UsageError(
            "git is not installed: `blockyard diff` reads revisions with git"
        ) from None
    except OSError as exc:  # an argument longer than the system passes to a program (E2BIG)
        raise UsageError(f"git {args[0]} cannot run: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"git {args[0]}: {message[-1] if message else f'exit {done.returncode}'}")
    return done.stdout


def _git_text(cwd: Path, *args: str) -> str:
    return git(cwd, *args).decode("utf-8", "replace").strip()


def in_git(folder: Path) -> bool:
    try:
        return _git_text(folder, "rev-parse", "--is-inside-work-tree") == "true"
    except UsageError:
        return False


def commit_of(yard: Path, revision: str) -> str | None:
    """The commit `revision` names, or None when it names none."""
    try:
        return _git_text(
            yard, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
        )
    except UsageError:
        return None


def default_branch(yard: Path) -> str:
    """The repository's default branch: origin's HEAD, else origin/main, origin/master, main, master."""
    try:
        head = _git_text(yard, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
        if head:
            return head
    except UsageError:
        pass
    for candidate in ("origin/main", "origin/master", "main", "master"):
        if commit_of(yard, candidate) is not None:
            return candidate
    raise UsageError(
        "cannot tell the default branch (no origin/HEAD, main or master): name the base, "
        "e.g. `blockyard diff origin/main`"
    )


def merge_base(yard: Path) -> tuple[str, str]:
    """(label, commit) of the merge base of HEAD with the default branch."""
    branch = default_branch(yard)
    commit = _git_text(yard, "merge-base", "HEAD", branch)
    return f"merge-base with {branch}", commit


@contextmanager
def sides(yard: Path, base: str | None, head: str | None) -> Iterator[tuple[Side, Side]]:
    """The base and head sides of a diff of the yard at `yard` (its working tree), cleaned up after.

    BASE and HEAD are folders or git revisions; HEAD defaults to the working tree and BASE to the
    merge base of HEAD with the default branch.
    """
    with tempfile.TemporaryDirectory(prefix="blockyard-diff-") as scratch:
        work = Path(scratch)
        if base is None:
            if not in_git(yard):
                raise UsageError(
                    f"{yard} is not in a git repository: name the two sides, e.g. "
                    "`blockyard diff OLD_FOLDER NEW_FOLDER`"
                )
            label, commit = merge_base(yard)
            base_side = checkout(yard, commit, work / "base", f"{label} ({commit[:7]})")
        else:
            base_side = side(yard, base, work / "base")
        head_side = Side(WORKING_TREE, yard) if head is None else side(yard, head, work / "head")
        yield base_side, head_side


def side(yard: Path, given: str, into: Path) -> Side:
    """A folder (as given) or a git revision of the yard."""
    shown = given if len(given) <= 80 else f"{given[:60]}...{given[-10:]}"
    shown = shown if shown.isprintable() else repr(shown)[1:-1]
    folder = Path(given)
    try:
        is_folder = folder.is_dir()
    except (OSError, ValueError):  # a name longer than the file system allows names no folder
        is_folder = False
    if is_folder:
        return Side(given, folder.resolve())
    if not in_git(yard):
        raise UsageError(f"'{shown}' is not a folder, and {yard} is not in a git repository")
    commit = commit_of(yard, given)
    if commit is None:
        raise UsageError(f"'{shown}' is neither a folder nor a git revision")
    return checkout(yard, commit, into, f"{given} ({commit[:7]})")


def checkout(yard: Path, commit: str, into: Path, label: str) -> Side:
    """Write the files of the yard at `commit` that the loader reads into `into`."""
    prefix = _git_text(yard, "rev-parse", "--show-prefix").rstrip("/")
    top = Path(_git_text(yard, "rev-parse", "--show-toplevel"))
    tree = _tree(top, commit, prefix)
    into.mkdir(parents=True)
    if tree is None:
        return Side(label, into, commit, exists=False)
    wanted = [CONFIG_FILE] if CONFIG_FILE in tree.files else []
    folders = _folders(top, tree)
    wanted += [path for path in tree.files if any(_under(path, folder) for folder in folders)]
    _write(top, tree, wanted, into)
    _write_prompts(top, tree, into, folders[0])
    return Side(label, into, commit)


def _tree(top: Path, commit: str, prefix: str) -> _Tree | None:
    """The files below `prefix` at `commit`; None when the folder did not exist then."""
    spec = f"{commit}:{prefix}" if prefix else f"{commit}^{{tree}}"
    try:
        listing = git(top, "ls-tree", "-r", "-z", spec)
    except UsageError:
        return None
    tree = _Tree()
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        tree.files[path.decode("utf-8", "surrogateescape")] = _Entry(mode, kind, sha)
    return tree


def _folders(top: Path, tree: _Tree) -> list[str]:
    """The blocks and flows folders of the yard at that commit (blockyard.yaml may move them)."""
    blocks, flows = "blocks", "flows"
    entry = tree.files.get(CONFIG_FILE)
    if entry is not None:
        # only its `paths:` matter here
        data = _parsed(_blobs(top, [entry.sha]).get(entry.sha, b""))
        paths = data.get("paths") if isinstance(data, dict) else None
        if isinstance(paths, dict):
            blocks = str(paths.get("blocks", blocks))
            flows = str(paths.get("flows", flows))
    return [posixpath.normpath(blocks), posixpath.normpath(flows)]


def _under(path: str, folder: str) -> bool:
    return folder == "." or path == folder or path.startswith(folder.rstrip("/") + "/")


def _blobs(top: Path, shas: list[str]) -> dict[str, bytes]:
    """The content of blobs by id, all through one `git cat-file --batch`."""
    if not shas:
        return {}
    out = git(top, "cat-file", "--batch", input_bytes="".join(f"{sha}\n" for sha in shas).encode())
    found: dict[str, bytes] = {}
    at = 0
    for sha in shas:
        end = out.index(b"\n", at)
        header = out[at:end].decode().split()
        if len(header) < 3:  # "<sha> missing"
            at = end + 1
            continue
        size = int(header[2])
        found[sha] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return found


def _write(top: Path, tree: _Tree, paths: list[str], into: Path) -> None:
    entries = {path: tree.files[path] for path in paths if tree.files[path].kind == "blob"}
    blobs = _blobs(top, sorted({entry.sha for entry in entries.values()}))
    for path, entry in entries.items():
        relative = PurePosixPath(path)
        if relative.is_absolute() or ".." in relative.parts:
            continue
        target = into.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        content = blobs.get(entry.sha, b"")
        if entry.mode == "120000":
            # a symbolic link: the loader judges where it leads, as in a work tree
            os.symlink(content.decode("utf-8", "surrogateescape"), target)
        else:
            target.write_bytes(content)


def _write_prompts(top: Path, tree: _Tree, into: Path, blocks: str) -> None:
    """The prompt files the blocks name (system_file, user_file) or include, and the files those include."""
    pending = set()
    for path in list(tree.files):
        if _under(path, blocks) and path.endswith((".yaml", ".yml")) and (into / path).is_file():
            pending |= _prompt_names((into / path).read_text("utf-8", "replace"))
    done: set[str] = set()
    for _ in range(MAX_PROMPT_ROUNDS):
        batch = sorted(
            name for name in pending - done if name in tree.files and not (into / name).exists()
        )
        done |= pending
        if not batch:
            return
        _write(top, tree, batch, into)
        pending = set()
        for name in batch:
            if (into / name).is_file():
                pending |= {
                    normal(i.name)
                    for i in includes((into / name).read_text("utf-8", "replace"))
                    if i.name
                }


def _parsed(raw: bytes) -> Any:
    """A YAML file's data by the engine's own loader, or None when it does not load (the loader
    reports why when the yard is loaded)."""
    try:
        return load_bytes(raw, "(git)").data
    except LoadError:
        return None


def _prompt_names(block_text: str) -> set[str]:
    """Prompt files a block file names or its inline prompts include (a file that does not parse names none)."""
    data = _parsed(block_text.encode("utf-8"))
    prompt = data.get("prompt") if isinstance(data, dict) else None
    if not isinstance(prompt, dict):
        return set()
    names: set[str] = set()
    for part in PARTS:
        inline, file = prompt.get(part), prompt.get(f"{part}_file")
        if isinstance(file, str):
            names.add(normal(file))
        if isinstance(inline, str):
            names |= {normal(i.name) for i in includes(inline) if i.name}
    return names
