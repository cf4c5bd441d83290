"""Long-term memory of runs: LangGraph's SQLite store in the state database (engine/memory/).

A flow with `memory: {scope: "users/{{ inputs.user_id }}"}` renders its scope from the run's
inputs. When an execution starts, the scope's preferences and the flow's recent history are
loaded (prompts see them as `user_preferences` and `user_history`); memory_read/memory_write
blocks go through `RunMemory`; when the run ends (finished or failed) one history record —
inputs, outputs, status — is stored under the run id, so a run that fails and is resumed to its
end leaves one record, not two.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from engine.bundle import Bundle
from engine.errors import UsageError
from engine.memory.scope import history_namespace, parse_scope, preferences_namespace
from engine.template_limits import TemplateLimits, using_limits
from engine.templates import TemplateError, render_text

T = TypeVar("T")
HISTORY_LIMIT = 20  # past runs offered to prompts and returned by a keyless history read


def render_scope(bundle: Bundle, inputs: dict[str, Any]) -> str | None:
    """The run's memory scope (`users/ada`), or None for a flow without `memory:`."""
    memory = bundle.flow.memory
    if memory is None:
        return None
    where = f"flow '{bundle.name}': memory scope"
    try:
        with using_limits(TemplateLimits.of(bundle.config)):
            scope = render_text(memory.scope, {"inputs": inputs}).strip()
    except TemplateError as exc:
        raise UsageError(f"{where}: {exc}") from None
    try:
        parse_scope(scope)
    except UsageError as exc:
        raise UsageError(f"{where} '{memory.scope}': {exc}") from None
    return scope


class MemoryStore:
    """The yard's memory store, opened on first use; its calls run off the event loop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    def store(self) -> Any:
        from langgraph.store.sqlite import SqliteStore

        from engine.memory.store import connect

        with self._lock:
            if self._store is None:
                self._conn = connect(self.path)
                store = SqliteStore(self._conn)
                store.setup()
                self._store = store
            return self._store

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    async def open(self, scope: str, flow: str, run_id: str) -> RunMemory:
        """The memory of one execution of a run, with the scope's preferences and history loaded."""
        from engine.memory.store import history, preferences

        def load() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            store = self.store()
            return preferences(store, scope), history(store, scope, flow, HISTORY_LIMIT)

        prefs, past = await self.call(load)
        return RunMemory(self, scope, flow, run_id, prefs, [r for r in past if r.get("run_id") != run_id])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._store = self._conn = None


class RunMemory:
    """One run's memory scope (engine.compile.context.MemorySource)."""

    def __init__(self, store: MemoryStore, scope: str, flow: str, run_id: str, preferences: dict[str, Any],
                 history: list[dict[str, Any]]) -> None:
        self.owner = store
        self.scope = scope
        self.flow = flow
        self.run_id = run_id
        self.preferences = preferences
        self.history = history

    def prompt_values(self) -> dict[str, Any]:
        return {"user_preferences": dict(self.preferences), "user_history": list(self.history)}

    def _namespace(self, namespace: str) -> tuple[str, ...]:
        if namespace == "history":
            return history_namespace(self.scope, self.flow)
        return preferences_namespace(self.scope)

    async def read(self, namespace: str, key: str | None) -> Any:
        if key is None and namespace == "preferences":
            return dict(self.preferences)
        if key is None:  # fresh: what this run wrote so far counts too
            from engine.memory.store import history

            return await self.owner.call(history, self.owner.store(), self.scope, self.flow, HISTORY_LIMIT)
        found = await self.owner.call(self.owner.store().get, self._namespace(namespace), key)
        if found is None:
            return None
        return found.value.get("value") if namespace == "preferences" else found.value

    async def write(self, namespace: str, key: str, value: Any) -> None:
        stored = {"value": value} if namespace == "preferences" else value
        await self.owner.call(self.owner.store().put, self._namespace(namespace), key, stored)
        if namespace == "preferences":
            self.preferences[key] = value  # later prompts of this run see what it just learned

    async def remember_run(self, record: dict[str, Any]) -> None:
        """Store the run's history record (under the run id: a resumed run replaces its own)."""
        await self.owner.call(self.owner.store().put, history_namespace(self.scope, self.flow), self.run_id, record)
