"""Hot reload: every change to the yard is validated and the good flows are swapped in.

The server holds one `Reloader`; its `catalog` is what every request reads. A reload runs the
loader and the checks in a worker thread, then replaces the catalog in one assignment on the
event loop. Runs never look at the catalog again after they start: they are pinned to their
bundle, so a swap never disturbs a run in progress or a paused one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from engine.core.diagnostics import Diagnostic
from engine.serve.catalog import Catalog, load_catalog, prompt_hashes
from engine.serve.logs import fields, get_logger
from engine.serve.watcher import YardWatcher, fingerprint

Listener = Callable[[Catalog, Catalog], None]


class Reloader:
    """Owns the current catalog and keeps it in step with the files."""

    def __init__(self, root: Path, catalog: Catalog | None = None) -> None:
        self.root = root.resolve()
        self.catalog = catalog or Catalog()
        self.listeners: list[Listener] = []
        self.last_error: str | None = None
        self.reloads = 0
        self._seen: tuple[tuple[str, str], ...] = ()
        self.log = get_logger()
        self._lock = asyncio.Lock()

    def load_now(self) -> Catalog:
        """First load, before the server starts (blocking)."""
        self._seen = fingerprint(self.root)
        self._swap(load_catalog(self.root, self.catalog), "startup", 0.0)
        return self.catalog

    async def reload(self, changed: Iterable[Path] = ()) -> Catalog:
        """Re-read the yard; keep the current catalog if the reload itself breaks."""
        async with self._lock:
            started = time.perf_counter()
            try:
                new = await asyncio.to_thread(load_catalog, self.root, self.catalog)
            except Exception as exc:  # a bug in a check must not take the server down
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.log.exception(
                    "reload_failed", extra=fields(kept_generation=self.catalog.generation)
                )
                return self.catalog
            self.last_error = None
            files = ",".join(sorted(_display(p, self.root) for p in changed)) or None
            self._swap(new, files, (time.perf_counter() - started) * 1000)
            return new

    async def watch(self, stop: asyncio.Event, watcher: YardWatcher | None = None) -> None:
        """Reload on every batch of changes until `stop` is set."""
        watcher = watcher or YardWatcher(self.root)
        batches = watcher.batches(stop, self.prompt_files)
        upcoming = asyncio.ensure_future(anext(batches))
        try:
            ready = asyncio.ensure_future(watcher.ready.wait())
            await asyncio.wait({ready, upcoming}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            # an edit between the last load and the watch start would otherwise wait for the next one
            if not upcoming.done() and await asyncio.to_thread(self._changed_since_load):
                await self.reload()
            while True:
                try:
                    changed = await upcoming
                except StopAsyncIteration:
                    return
                await self.reload(changed)
                upcoming = asyncio.ensure_future(anext(batches))
        finally:
            upcoming.cancel()
            await batches.aclose()

    def prompt_files(self) -> list[str]:
        """The prompt files the served flows are made of: watched besides the definitions."""
        return [name for name, _hash in self.catalog.prompts]

    def _changed_since_load(self) -> bool:
        catalog = self.catalog
        return (
            fingerprint(self.root) != self._seen
            or prompt_hashes(self.root, [name for name, _hash in catalog.prompts])
            != catalog.prompts
        )

    def _swap(self, new: Catalog, changed: str | None, ms: float) -> None:
        old, self.catalog = self.catalog, new
        self.reloads += 1
        self._report(old, new, changed, ms)
        for listener in self.listeners:
            listener(old, new)

    def _report(self, old: Catalog, new: Catalog, changed: str | None, ms: float) -> None:
        log = self.log
        log.info(
            "reload",
            extra=fields(
                changed=changed,
                generation=new.generation,
                flows=len(new.flows),
                errors=sum(1 for d in new.diagnostics if d.severity == "error"),
                ms=round(ms, 1),
            ),
        )
        for name, entry in new.flows.items():
            before = old.flows.get(name)
            if before is None or before.digest != entry.digest:
                log.info(
                    "flow_swapped",
                    extra=fields(flow=name, version=entry.version, digest=entry.digest),
                )
        for name in old.flows.keys() - new.flows.keys():
            log.info("flow_removed", extra=fields(flow=name))
        for name, problems in new.stale.items():
            if name in new.flows and old.stale.get(name) != problems:
                log.warning(
                    "flow_kept_last_good",
                    extra=fields(
                        flow=name, version=new.flows[name].version, problems=len(problems)
                    ),
                )
        for diagnostic in sorted(set(new.diagnostics) - set(old.diagnostics)):
            _log_diagnostic(diagnostic)


def _log_diagnostic(d: Diagnostic) -> None:
    level = get_logger().error if d.severity == "error" else get_logger().warning
    level(
        "diagnostic",
        extra=fields(file=d.file, line=d.line, col=d.col, code=d.code, message=d.message),
    )


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
