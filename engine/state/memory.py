"""Long-term memory across runs: LangGraph's store in the yard's state database — its SQLite store
in the file (shared with the checkpointer, WAL mode), its Postgres store on a Postgres server.

A flow's `memory: {scope: "users/{{ inputs.user_id }}"}` renders to a scope such as `users/ada`
(engine/runtime/memory.py renders it for a run); preferences live under `(users, ada, preferences)`
and the history of a flow's runs under `(users, ada, flows, <flow>, history)` (docs/memory.md).

`MemoryStore` is the store of one process (opened on first use, its calls off the event loop);
`RunMemory` is one run's scope of it, as memory_read/memory_write blocks and prompts see it
(engine/executors/memory.py); `open_store` serves `blockyard memory` (engine/cli/memory.py).
`StoreMemory` is the same scope on any LangGraph store: the `store=` a compiled flow is given when
it runs as a standalone LangGraph graph (engine/runtime/standalone.py, docs/langgraph.md).
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from langgraph.store.base import BaseStore

from engine.core.errors import UsageError
from engine.core.values import JsonDict
from engine.state.database import guard, open_database
from engine.state.location import Location

T = TypeVar("T")
HISTORY_LIMIT = 20  # past runs offered to prompts and returned by a keyless history read

# ---- scopes ------------------------------------------------------------------------------------

_SEGMENT = re.compile(r"^[A-Za-z0-9_.@:+-]{1,128}$")


def parse_scope(scope: str) -> tuple[str, ...]:
    """'users/ada' -> ('users', 'ada'); refuses empty, '..'-like or odd segments."""
    parts = tuple(part for part in scope.strip().strip("/").split("/"))
    if not parts or any(
        not part or part in (".", "..") or not _SEGMENT.match(part) for part in parts
    ):
        raise UsageError(
            f"invalid memory scope '{scope}': use segments of letters, digits and _.@:+- "
            "separated by '/', e.g. users/ada"
        )
    if len(parts) > 8:
        raise UsageError(f"invalid memory scope '{scope}': at most 8 segments")
    return parts


def preferences_namespace(scope: str) -> tuple[str, ...]:
    return (*parse_scope(scope), "preferences")


def history_namespace(scope: str, flow: str) -> tuple[str, ...]:
    return (*parse_scope(scope), "flows", flow, "history")


# ---- what is stored -------------------------------------------------------------------------------

# A memory value is stored as its JSON text under this one key, on both backends: Postgres's store
# keeps items as JSONB, which sorts an object's keys, and a value must come back as it was written
# (the same on SQLite and Postgres). Items written before (a preference as {"value": v}, a history
# record as itself) are still read.
TEXT_KEY = "blockyard_json"


def pack(value: Any) -> JsonDict:
    """What the store keeps for a memory value: its JSON text, key order and all."""
    return {TEXT_KEY: json.dumps(value, ensure_ascii=False, default=str)}


def is_packed(stored: Any) -> bool:
    """Whether a stored item is `pack`'s form."""
    return isinstance(stored, dict) and len(stored) == 1 and isinstance(stored.get(TEXT_KEY), str)


def unpack(stored: Any, *, preference: bool) -> Any:
    """The value of a stored item (`pack`'s, or an older item's: a preference's {"value": v})."""
    if is_packed(stored):
        return json.loads(stored[TEXT_KEY])
    if preference:
        return stored.get("value") if isinstance(stored, dict) else None
    return stored


# ---- the store -----------------------------------------------------------------------------------

LIST_LIMIT = 1000


def connect(path: Path) -> sqlite3.Connection:
    """A connection fit for several processes on one file."""
    return open_database(path)


def _location(where: Path | Location) -> Location:
    return where if isinstance(where, Location) else Location(where)


def _open(location: Location) -> tuple[BaseStore, Any]:
    """(the store, the connection to close) of a state database, set up."""
    if location.url is None:
        # LangGraph's SQLite store loads sqlite-vec and with it numpy (~0.1 s): only a flow that uses memory pays
        from langgraph.store.sqlite import SqliteStore

        conn = connect(location.path)
        try:
            with guard(location.path):
                store = SqliteStore(conn)
                store.setup()
        except BaseException:
            conn.close()
            raise
        return store, conn
    # psycopg and LangGraph's Postgres store: loaded only for a Postgres database
    from langgraph.store.postgres import PostgresStore

    from engine.state.postgres import PgConnection, connect_raw, setup_lock  # (psycopg, as above)

    raw = connect_raw(location.url, dict_rows=True)
    try:
        pg_store = PostgresStore(raw)
        with setup_lock(PgConnection(raw, location.url)):
            pg_store.setup()
    except BaseException:
        raw.close()
        raise
    return pg_store, raw


@contextmanager
def open_store(where: Path | Location) -> Iterator[BaseStore]:
    """The store for the length of a block; a locked or damaged file is a clear `StateError`."""
    location = _location(where)
    store, conn = _open(location)
    try:
        if location.url is None:
            with guard(location.path):
                yield store
        else:
            yield store
    finally:
        conn.close()


def preferences(store: BaseStore, scope: str) -> JsonDict:
    """Every preference of a scope, key -> value."""
    items = store.search(preferences_namespace(scope), limit=LIST_LIMIT)
    return {
        item.key: unpack(item.value, preference=True) for item in sorted(items, key=lambda i: i.key)
    }


def is_empty(store: BaseStore) -> bool:
    """Whether nothing at all has been remembered (in any scope)."""
    return not store.search((), limit=1)


def get_preference(store: BaseStore, scope: str, key: str) -> tuple[bool, Any]:
    """(whether the scope has the preference, its value)."""
    found = store.get(preferences_namespace(scope), key)
    return (False, None) if found is None else (True, unpack(found.value, preference=True))


def set_preference(store: BaseStore, scope: str, key: str, value: Any) -> None:
    store.put(preferences_namespace(scope), key, pack(value))


def history(store: BaseStore, scope: str, flow: str, limit: int = 20) -> list[JsonDict]:
    """The newest `limit` history records of a flow in a scope, oldest first."""
    items = store.search(history_namespace(scope, flow), limit=LIST_LIMIT)
    items.sort(key=lambda i: i.created_at)
    return [unpack(item.value, preference=False) for item in items[-limit:]]


class MemoryStore:
    """The yard's memory store, opened on first use; its calls run off the event loop."""

    def __init__(self, where: Path | Location) -> None:
        self.location = _location(where)
        self.path = self.location.path
        self._store: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    def store(self) -> Any:
        with self._lock:
            if self._store is not None and self.location.url is not None and self._conn.closed:
                # the server ended the session (a restart, a failover): the call that met it failed, and
                # the store goes on with a new one — psycopg's connection would stay closed for good
                self._let_go()
            if self._store is None:
                self._store, self._conn = _open(self.location)
            return self._store

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    async def open(self, scope: str, flow: str, run_id: str) -> RunMemory:
        """The memory of one execution of a run, with the scope's preferences and history loaded."""

        def load() -> tuple[JsonDict, list[JsonDict]]:
            store = self.store()
            return preferences(store, scope), history(store, scope, flow, HISTORY_LIMIT)

        prefs, past = await self.call(load)
        return RunMemory(
            self, scope, flow, run_id, prefs, [r for r in past if r.get("run_id") != run_id]
        )

    def close(self) -> None:
        with self._lock:
            self._let_go()

    def _let_go(self) -> None:
        """With the lock held: let go of the store and its connection (opened again on next use)."""
        if self._conn is not None:
            self._conn.close()
        self._store = self._conn = None


class _ScopeView:
    """What a run knows of its memory scope when it starts: its preferences and the flow's recent
    history (what prompts see), and where each namespace lives."""

    def __init__(
        self,
        scope: str,
        flow: str,
        run_id: str,
        preferences: JsonDict,
        history: list[JsonDict],
    ) -> None:
        self.scope = scope
        self.flow = flow
        self.run_id = run_id
        self.preferences = preferences
        self.history = history

    def prompt_values(self) -> JsonDict:
        return {"user_preferences": dict(self.preferences), "user_history": list(self.history)}

    def _namespace(self, namespace: str) -> tuple[str, ...]:
        if namespace == "history":
            return history_namespace(self.scope, self.flow)
        return preferences_namespace(self.scope)


class RunMemory(_ScopeView):
    """One run's memory scope (engine.nodes.context.MemorySource)."""

    def __init__(
        self,
        store: MemoryStore,
        scope: str,
        flow: str,
        run_id: str,
        preferences: JsonDict,
        history: list[JsonDict],
    ) -> None:
        super().__init__(scope, flow, run_id, preferences, history)
        self.owner = store

    async def read(self, namespace: str, key: str | None) -> Any:
        if key is None and namespace == "preferences":
            return dict(self.preferences)
        if key is None:  # fresh: what this run wrote so far counts too
            return await self.owner.call(
                history, self.owner.store(), self.scope, self.flow, HISTORY_LIMIT
            )
        found = await self.owner.call(self.owner.store().get, self._namespace(namespace), key)
        if found is None:
            return None
        return unpack(found.value, preference=namespace == "preferences")

    async def write(self, namespace: str, key: str, value: Any) -> None:
        await self.owner.call(self.owner.store().put, self._namespace(namespace), key, pack(value))
        if namespace == "preferences":
            self.preferences[key] = value  # later prompts of this run see what it just learned

    async def remember_run(self, record: JsonDict) -> None:
        """Store the run's history record (under the run id: a resumed run replaces its own)."""
        await self.owner.call(
            self.owner.store().put,
            history_namespace(self.scope, self.flow),
            self.run_id,
            pack(record),
        )


class StoreMemory(_ScopeView):
    """One run's memory scope on any LangGraph store, laid out as `RunMemory`'s (same namespaces and
    values), through the store's async API: what a standalone graph's flow reads and writes when it
    is given a `store=` (engine.nodes.context.MemorySource)."""

    def __init__(
        self,
        store: BaseStore,
        scope: str,
        flow: str,
        run_id: str,
        preferences: JsonDict,
        history: list[JsonDict],
    ) -> None:
        super().__init__(scope, flow, run_id, preferences, history)
        self.store = store

    @classmethod
    async def open(cls, store: BaseStore, scope: str, flow: str, run_id: str) -> StoreMemory:
        """The scope with its preferences and the flow's recent history loaded."""
        prefs = await store.asearch(preferences_namespace(scope), limit=LIST_LIMIT)
        past = await cls._history(store, scope, flow)
        found = {
            item.key: unpack(item.value, preference=True)
            for item in sorted(prefs, key=lambda item: item.key)
        }
        return cls(
            store,
            scope,
            flow,
            run_id,
            found,
            [record for record in past if record.get("run_id") != run_id],
        )

    @staticmethod
    async def _history(store: BaseStore, scope: str, flow: str) -> list[JsonDict]:
        items = await store.asearch(history_namespace(scope, flow), limit=LIST_LIMIT)
        items.sort(key=lambda i: i.created_at)
        return [unpack(item.value, preference=False) for item in items[-HISTORY_LIMIT:]]

    async def read(self, namespace: str, key: str | None) -> Any:
        if key is None and namespace == "preferences":
            return dict(self.preferences)
        if key is None:
            return await self._history(self.store, self.scope, self.flow)
        found = await self.store.aget(self._namespace(namespace), key)
        if found is None:
            return None
        return unpack(found.value, preference=namespace == "preferences")

    async def write(self, namespace: str, key: str, value: Any) -> None:
        await self.store.aput(self._namespace(namespace), key, pack(value))
        if namespace == "preferences":
            self.preferences[key] = value

    async def remember_run(self, record: JsonDict) -> None:
        """Store the run's history record under the run id (a resumed run replaces its own)."""
        await self.store.aput(history_namespace(self.scope, self.flow), self.run_id, pack(record))
