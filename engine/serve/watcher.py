"""Notice edits to a yard's definitions: flows/, blocks/ (recursively), blockyard.yaml, and the prompt
files the flows use (engine/definitions/closure.py; the reloader says which, engine/serve/reload.py).

watchfiles (Rust `notify`, inotify on Linux) is tuned for a save-to-serve time well under
300 ms: it returns a batch once no new change has arrived for `STEP_MS`, at most `DEBOUNCE_MS`
after the first one (its defaults, 50 ms and 1600 ms, are meant for restarting processes).
The state database and .git are never watched: only the definition folders, plus the folders
holding them (non-recursively) so that blockyard.yaml and newly created folders are seen, and
the folders holding the prompt files (non-recursively, only those files).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncGenerator, Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import watchfiles

from engine.definitions.files import Bounds, Refused, TooLarge, list_files, read_bytes
from engine.definitions.load import MAX_FILE_BYTES, LoadError, load_file
from engine.definitions.project import CONFIG_FILE, YAML_SUFFIXES, is_definition
from engine.spec.config import PathsSpec

STEP_MS = 15
DEBOUNCE_MS = 150


def definition_folders(root: Path) -> list[Path]:
    """flows/ and blocks/ as blockyard.yaml names them (defaults when it can't be read), resolved.

    A folder that is a link leading out of the yard keeps its own name: it is not watched (the
    loader reports it, BY008), and what happens where it leads is none of the server's business.
    """
    paths = _paths(root)
    bounds = Bounds.of(root, paths.flows, paths.blocks)
    folders = []
    for folder in (root / paths.flows, root / paths.blocks):
        real = folder.resolve()
        folders.append(real if bounds.contains(real) else Path(os.path.abspath(folder)))
    return folders


def _paths(root: Path) -> PathsSpec:
    config = root / CONFIG_FILE
    if config.is_file() or config.is_symlink():
        try:
            data = load_file(config, CONFIG_FILE, bounds=Bounds.of(root)).data
        except LoadError:
            data = None
        section = data.get("paths") if isinstance(data, dict) else None
        if isinstance(section, dict):
            with contextlib.suppress(ValueError):
                return PathsSpec.model_validate(
                    {k: v for k, v in section.items() if k in ("flows", "blocks")}
                )
    return PathsSpec()


def _watched(folder: Path) -> bool:
    """Whether to watch a folder recursively: it exists and stays inside the yard (definition_folders
    resolved those; one left unresolved leads out of the yard through a link)."""
    return folder.is_dir() and folder == folder.resolve()


class Layout(NamedTuple):
    """What a watcher watches: the definition folders, those of them watched recursively (they exist
    inside the yard), the prompt files, and the folders watched non-recursively (_anchors)."""

    folders: list[Path]
    deep: list[Path]
    extra: list[Path]
    anchors: list[Path]


class YardWatcher:
    """Async batches of changed definition files (absolute paths), until `stop` is set."""

    def __init__(
        self, root: Path, *, step_ms: int = STEP_MS, debounce_ms: int = DEBOUNCE_MS
    ) -> None:
        self.root = root.resolve()
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.ready = asyncio.Event()  # set once changes are being recorded

    async def batches(
        self, stop: asyncio.Event, prompts: Callable[[], Iterable[str]] = tuple
    ) -> AsyncGenerator[set[Path], None]:
        """`prompts`: the prompt files to watch besides the definitions (names relative to the yard),
        asked again after every batch, once the batch has been reloaded.

        What is watched (the layout) follows the yard: a folder that comes or goes, blockyard.yaml
        moving the definition folders, the flows using other prompt files. A new layout is armed, and
        then a batch of the definition folders is yielded (the reload reads whatever landed while
        nothing watched it) and the layout is looked at again: a folder made after the layout was
        worked out and before its watches were armed would otherwise never be seen, nor the files
        written in it afterwards."""
        moved: set[Path] = set()
        while not stop.is_set():
            layout = self._layout(prompts)
            queue: asyncio.Queue[set[Path]] = asyncio.Queue()
            restart = asyncio.Event()
            pumps = [
                asyncio.create_task(self._pump(layout.anchors, False, queue, restart, stop, layout))
            ]
            if layout.deep:
                pumps.append(
                    asyncio.create_task(self._pump(layout.deep, True, queue, restart, stop, layout))
                )
            # watchfiles sets its watches up in the first step of each pump, before it awaits
            await asyncio.sleep(0)
            self.ready.set()
            try:
                if moved:  # files may have landed in new folders before they were watched
                    yield moved
                moved = set()
                armed = self._layout(prompts)
                if armed != layout:  # and folders, between working the layout out and arming it
                    moved = set(armed.folders)
                    continue
                while not stop.is_set():
                    getter = asyncio.ensure_future(queue.get())
                    stopper = asyncio.ensure_future(stop.wait())
                    done, _ = await asyncio.wait(
                        {getter, stopper}, return_when=asyncio.FIRST_COMPLETED
                    )
                    stopper.cancel()
                    if getter not in done:
                        getter.cancel()
                        break
                    yield getter.result()
                    new_layout = self._layout(prompts)
                    if new_layout != layout:
                        moved = set(new_layout.folders)
                        break
            finally:
                restart.set()
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)

    def _layout(self, prompts: Callable[[], Iterable[str]]) -> Layout:
        folders = definition_folders(self.root)
        extra = prompt_paths(self.root, prompts())
        return Layout(
            folders, [f for f in folders if _watched(f)], extra, self._anchors(folders, extra)
        )

    def _anchors(self, folders: list[Path], extra: list[Path]) -> list[Path]:
        """The folders watched non-recursively: the root, the definition folders' parents, and the
        nearest existing folder of each prompt file."""
        return sorted(
            {
                self.root,
                *(f.parent for f in folders if f.parent.is_dir()),
                *(_existing_folder(self.root, path) for path in extra),
            }
        )

    async def _pump(
        self,
        paths: list[Path],
        recursive: bool,
        queue: asyncio.Queue[set[Path]],
        restart: asyncio.Event,
        stop: asyncio.Event,
        layout: Layout,
    ) -> None:
        folders, extra = layout.folders, layout.extra

        def relevant(_change: watchfiles.Change, name: str) -> bool:
            path = Path(name)
            if path in extra:
                return True
            if recursive:
                # folders too: a file written right after its folder is seen by the reload
                return path.suffix in YAML_SUFFIXES or not path.suffix or path.is_dir()
            # a folder on the way to a prompt file that does not exist yet: watch it once it does
            return (
                (path.name == CONFIG_FILE and path.parent == self.root)
                or path in folders
                or any(path in prompt.parents for prompt in extra)
            )

        # No timeout for the Rust loop (0): it looks at `restart` every step anyway, and when its timeout
        # fires it clears the pending changes, losing one that arrives in that instant (watchfiles 1.3).
        async for changes in watchfiles.awatch(
            *paths,
            watch_filter=relevant,
            recursive=recursive,
            step=self.step_ms,
            debounce=self.debounce_ms,
            stop_event=restart,
            rust_timeout=0,
        ):
            await queue.put({Path(name) for _, name in changes})
            if stop.is_set():
                return


def prompt_paths(root: Path, names: Iterable[str]) -> list[Path]:
    """The prompt files `names` (relative to the yard) as absolute paths, those whose folder stays
    inside the yard: a folder that leads out through a link is not watched (the run refuses the file)."""
    bounds = Bounds.of(root)
    found = set()
    for name in names:
        path = root / name
        if bounds.contains(_existing_folder(root, path).resolve()):
            found.add(Path(os.path.abspath(path)))
    return sorted(found)


def _existing_folder(root: Path, path: Path) -> Path:
    """The nearest folder of `path` that exists (the yard's root at worst)."""
    folder = path.parent
    while folder != root and not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def fingerprint(root: Path) -> tuple[tuple[str, str], ...]:
    """(path, content hash) of every definition file: tells whether anything changed in between
    (file times are too coarse for edits made in the same few milliseconds). Read like the loader
    reads: nothing outside the yard, no FIFO or device (either would hang the server), bounded."""
    paths = _paths(root)
    bounds = Bounds.of(root, paths.flows, paths.blocks)
    found: list[tuple[str, str]] = []
    candidates = [root / CONFIG_FILE]
    for folder in (root / paths.flows, root / paths.blocks):
        listing = list_files(folder, bounds, is_definition)
        candidates.extend(listing.files)
        found.extend((str(path), f"refused {refusal.code}") for path, refusal in listing.refused)
    for path in candidates:
        try:
            raw = read_bytes(
                path, MAX_FILE_BYTES, Bounds.of(root) if path == candidates[0] else bounds
            )
        except Refused as refusal:
            found.append((str(path), f"refused {refusal.code}"))
        except (OSError, TooLarge):
            continue
        else:
            found.append((str(path), hashlib.sha1(raw, usedforsecurity=False).hexdigest()))
    return tuple(sorted(set(found)))
