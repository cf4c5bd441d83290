"""The files a run wrote: where (its output folder, recorded in its first `run_started` event) and
which (its `file_written` events), for resuming it and for `blockyard runs show`."""

from __future__ import annotations

import json
from collections.abc import Iterable

from engine.core.events import FILE_WRITTEN, RUN_STARTED, Event
from engine.core.values import JsonDict
from engine.state.database import Connection


def output_dir_of(conn: Connection, run_id: str) -> str | None:
    """The yard folder run `run_id` writes its files to, or None for its own workspace."""
    row = conn.execute(
        "SELECT data FROM events WHERE run_id = ? AND type = ? ORDER BY seq LIMIT 1",
        (run_id, str(RUN_STARTED)),
    ).fetchone()
    if row is None:
        return None
    value = json.loads(row[0]).get("output_dir")
    return value if isinstance(value, str) else None


def files_written(events: Iterable[Event]) -> list[JsonDict]:
    """One entry per file the run wrote, in the order first written: path, bytes of the last write,
    how many writes, and the step that wrote it last."""
    files: dict[str, JsonDict] = {}
    for event in events:
        if event.type != FILE_WRITTEN:
            continue
        path = str(event.data.get("path"))
        entry = files.setdefault(path, {"path": path, "bytes": 0, "writes": 0, "step": None})
        entry["bytes"] = event.data.get("bytes")
        entry["writes"] += 1
        entry["step"] = event.step
    return list(files.values())
