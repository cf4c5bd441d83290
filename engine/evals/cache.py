"""The response cache's folder: one JSON file per reply, named by the digest of what was asked.

`<folder>/<2 hex>/<64 hex>.json`, written whole or not at all (a temporary file renamed into place), so
that concurrent cases and a CI job killed halfway never leave a half-written reply. The key (what was
asked: engine/models/cached.py) is hashed, never stored; an entry holds the reply, its token counts, how
long the call took and what made it (provider, model, profile, block). Entries are never expired: a
changed prompt, model or setting is another key, and `--no-cache` or deleting the folder starts afresh.
CI keeps the folder between runs (actions/cache on `.blockyard/cache/models`: docs/evals.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.events import now_iso

DEFAULT_FOLDER = Path(".blockyard") / "cache" / "models"
ENV = "BLOCKYARD_EVAL_CACHE"  # a folder instead of the yard's default
MAX_ENTRY_BYTES = 32 * 2**20


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    errors: int = (
        0  # entries that could not be read or written (the call was made, or its reply not kept)
    )

    def as_dict(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "writes": self.writes,
            "errors": self.errors,
        }


def digest(key: Mapping[str, Any]) -> str:
    """The entry's name: SHA-256 of the key as canonical JSON."""
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class FolderCache:
    """A `ReplyCache` (engine/models/cached.py) in a folder; safe to share between tasks and threads."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._asking: dict[
            str, asyncio.Future[None]
        ] = {}  # keys a call is being made for, by digest

    def __repr__(self) -> str:
        return f"FolderCache({str(self.folder)!r})"

    def path(self, key: Mapping[str, Any]) -> Path:
        name = digest(key)
        return self.folder / name[:2] / f"{name}.json"

    async def get(self, key: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The entry for `key`; on a miss the caller asks the model and must `put` or `abandon`, and the
        same key asked meanwhile (in this event loop) waits for that instead of asking too."""
        name = digest(key)
        while (asking := self._asking.get(name)) is not None:
            await asyncio.shield(asking)
        entry = self.read(key)
        if entry is None:
            self._asking[name] = asyncio.get_running_loop().create_future()
        return entry

    def abandon(self, key: Mapping[str, Any]) -> None:
        self._answered(digest(key))

    def _answered(self, name: str) -> None:
        asking = self._asking.pop(name, None)
        if asking is not None and not asking.done():
            asking.set_result(None)

    def read(self, key: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The entry for `key`, or None (counted as a hit or a miss)."""
        path = self.path(key)
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_ENTRY_BYTES + 1)
            entry = json.loads(raw) if len(raw) <= MAX_ENTRY_BYTES else None
        except FileNotFoundError:
            entry = None
        except (OSError, ValueError):  # unreadable or damaged: asked again, and written anew
            entry = None
            self._count("errors")
        if not isinstance(entry, dict) or "reply" not in entry:
            self._count("misses")
            return None
        self._count("hits")
        return entry

    def put(self, key: Mapping[str, Any], entry: Mapping[str, Any]) -> None:
        path = self.path(key)
        text = json.dumps({**entry, "kept": now_iso()}, ensure_ascii=False, default=str)
        try:
            self._write(path, text)
        finally:
            self._answered(path.stem)

    def _write(self, path: Path, text: str) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".entry-", dir=path.parent)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except (
            OSError,
            UnicodeError,
        ):  # a full disk, a read-only folder: the reply is not kept, the eval goes on
            self._count("errors")
            return
        self._count("writes")

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self.stats, what, getattr(self.stats, what) + 1)
