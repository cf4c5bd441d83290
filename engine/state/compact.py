"""The final checkpoint of a finished run, compressed in the SQLite state database.

A finished run keeps one checkpoint (docs/runtime.md, "What a finished run keeps"). Most of it is
LangGraph's bookkeeping (a version string per channel and per node that saw it), which zlib
shrinks about fivefold: a 50-step chain's ~10 KB final checkpoint becomes ~2 KB. Only that kept
checkpoint is compressed, once, by the statement that prunes the others (run by the writer, in the
transaction that records the run's end), so no step pays for it. Its `type` column gets
`COMPRESSED` appended; `Decompressing` reads both kinds. Postgres compresses large values itself
(TOAST), so its checkpoints stay as LangGraph writes them.
"""

from __future__ import annotations

import sqlite3
import zlib
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

COMPRESSED = "+zlib"  # appended to a checkpoint's serde type
SQL_FUNCTION = "blockyard_compress"  # the SQLite function the pruning statement calls


def register(conn: sqlite3.Connection) -> None:
    """Give the connection `blockyard_compress(blob)` (the writer's: it runs the pruning statements)."""
    conn.create_function(SQL_FUNCTION, 1, _compress, deterministic=True)


def _compress(blob: bytes | None) -> bytes | None:
    return zlib.compress(blob, 6) if blob is not None else None


class Decompressing(SerializerProtocol):
    """A serializer that reads compressed checkpoints too; it writes what `inner` writes."""

    def __init__(self, inner: SerializerProtocol | None = None) -> None:
        self.inner = inner if inner is not None else JsonPlusSerializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_.endswith(COMPRESSED):
            return self.inner.loads_typed((type_[: -len(COMPRESSED)], zlib.decompress(blob)))
        return self.inner.loads_typed(data)
