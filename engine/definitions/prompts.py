"""Prompt files: `prompt: {system_file: prompts/manager.md}` and `{% include 'prompts/x.md' %}`.

Names are paths relative to the yard's root (also inside an included file), written without `..`
and not absolute; the file is read like a definition (engine/definitions/files.py): never through a link
that leads out of the yard, only a regular file, at most MAX_BYTES. Includes nest at most
MAX_DEPTH files deep and must not include themselves.

A run pins the text of every prompt file its blocks use, with the rest of its definition
(engine/bundle.py), and renders includes from that pinned text only (engine/templates/render.py): editing a
prompt never changes a run in progress. Imports nothing heavier than jinja2.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from jinja2 import nodes

from engine.definitions.files import Bounds, Refused, TooLarge, read_bytes
from engine.templates.render import TemplateError, parse

MAX_BYTES = 1_000_000
MAX_DEPTH = 8
PARTS = ("system", "user")


class PromptFileError(Exception):
    """A prompt file that cannot be used; the message names it as written."""


def path_problem(name: str) -> str | None:
    """Why `name` cannot name a prompt file of the yard, or None."""
    if not name or not name.strip() or "\x00" in name:
        return "the name is empty"
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if posix.is_absolute() or windows.drive or windows.root:
        return "it is absolute; name the file relative to the yard, e.g. prompts/manager.md"
    if ".." in posix.parts or ".." in windows.parts:
        return "it contains '..'; prompt files stay inside the yard"
    if "\\" in name:
        return "write it with forward slashes"
    return None


def normal(name: str) -> str:
    """The key a prompt file is pinned under: `./prompts//a.md` -> `prompts/a.md`."""
    return posixpath.normpath(name)


def read_prompt(root: Path, bounds: Bounds, name: str) -> str:
    """The text of prompt file `name` of the yard at `root`; PromptFileError saying why not."""
    problem = path_problem(name)
    if problem is not None:
        raise PromptFileError(f"prompt file '{name}': {problem}")
    path = root / normal(name)
    try:
        data = read_bytes(path, MAX_BYTES, bounds, normal(name))
    except Refused as refusal:
        raise PromptFileError(f"prompt file {refusal.message}") from None
    except TooLarge:
        raise PromptFileError(f"prompt file '{name}' is larger than {MAX_BYTES:,} bytes") from None
    except FileNotFoundError:
        raise PromptFileError(f"prompt file '{name}' does not exist") from None
    except OSError as exc:
        raise PromptFileError(
            f"prompt file '{name}' cannot be read: {exc.strerror or exc}"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PromptFileError(f"prompt file '{name}' is not UTF-8 text") from None


@dataclass(frozen=True)
class Include:
    """One `{% include %}` of a template: the file name (None when it is not a constant text) and
    the line of the template it is on."""

    name: str | None
    line: int


def includes(source: str) -> list[Include]:
    """The includes of a template (none when it does not parse: its syntax error is reported apart)."""
    if "include" not in source:
        return []
    try:
        tree = parse(source)
    except (TemplateError, RecursionError):
        return []
    found: list[Include] = []
    for node in tree.find_all(nodes.Include):
        template = node.template
        name = (
            template.value
            if isinstance(template, nodes.Const) and isinstance(template.value, str)
            else None
        )
        found.append(Include(name, node.lineno))
    return found


def prompt_sources(prompt: object) -> Iterator[tuple[str, str | None, str | None]]:
    """(part, inline text, file name) for the system and user parts of a PromptSpec."""
    for part in PARTS:
        yield part, getattr(prompt, part, None), getattr(prompt, f"{part}_file", None)


def pin(root: Path, bounds: Bounds, sources: Iterable[str], files: Iterable[str]) -> dict[str, str]:
    """The text of the prompt files `files` and of every file the templates `sources` (and those
    files) include, by normal name; PromptFileError for the first that cannot be read."""
    pinned: dict[str, str] = {}
    pending: list[tuple[str, int]] = [(normal(name), 0) for name in files]
    for source in sources:
        pending.extend(
            (normal(found.name), 1) for found in includes(source) if found.name is not None
        )
    while pending:
        name, depth = pending.pop()
        if name in pinned:
            continue
        if depth > MAX_DEPTH:
            raise PromptFileError(
                f"prompt file '{name}' is included more than {MAX_DEPTH} files deep"
            )
        text = pinned[name] = read_prompt(root, bounds, name)
        pending.extend(
            (normal(found.name), depth + 1) for found in includes(text) if found.name is not None
        )
    return pinned


def referenced(root: Path, bounds: Bounds, prompt: object) -> set[str]:
    """The prompt files a PromptSpec names or includes (through the files too), by normal name: what
    a flow using it is made of. Never fails: a file that cannot be read is named, its includes unknown."""
    sources = [inline for _part, inline, _file in prompt_sources(prompt) if inline is not None]
    pending = [
        normal(name)
        for _part, _inline, name in prompt_sources(prompt)
        if name is not None and path_problem(name) is None
    ]
    pending += [
        normal(found.name)
        for source in sources
        for found in includes(source)
        if found.name is not None and path_problem(found.name) is None
    ]
    named: set[str] = set()
    while pending and len(named) < 1000:  # bounded, whatever the files include
        name = pending.pop()
        if name in named:
            continue
        named.add(name)
        try:
            text = read_prompt(root, bounds, name)
        except PromptFileError:
            continue
        pending += [
            normal(found.name)
            for found in includes(text)
            if found.name is not None and path_problem(found.name) is None
        ]
    return named


def resolved_prompt(prompt: object, files: Mapping[str, str]) -> dict[str, str | None]:
    """The `system` and `user` texts of a PromptSpec, its files read from `files` (pinned)."""
    texts: dict[str, str | None] = {}
    for part, inline, name in prompt_sources(prompt):
        texts[part] = files.get(normal(name)) if name is not None else inline
    return texts
