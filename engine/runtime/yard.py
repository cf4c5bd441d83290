"""The Python API (DESIGN.md §8): load a yard, run flows by name, stream events, resume runs.

    from engine import Yard
    with Yard.load(".") as yard:
        result = yard.run("hello", {"name": "Ada"})
        async for event in yard.astream("hello", {"name": "Ada"}): ...

The async methods are the core; the sync ones run them on a private event loop (so they work
inside a running loop too). One Yard holds one connection pair to the state database and is safe
to share between threads and event loops.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from pathlib import Path
from types import TracebackType
from typing import Any

from engine.bundle import Bundle, make_bundle
from engine.compile.context import RunContext
from engine.diagnostics import did_you_mean
from engine.errors import UsageError, ValidationFailed
from engine.project import Project, load_project
from engine.runtime import owner, store
from engine.runtime.events import APPROVAL_REQUIRED, TERMINAL_TYPES, Event, now_iso
from engine.runtime.ids import check_run_id, new_run_id
from engine.runtime.portal import Portal
from engine.runtime.runner import Execution, RunResult, execute
from engine.runtime.savers import StateDB
from engine.runtime.store import RunRecord, StateError, effective_status
from engine.spec.block import MODEL_KINDS


class Yard:
    """A loaded, validated yard that runs flows durably on its state database."""

    def __init__(self, project: Project, *, state: Path | str | None = None, synchronous: str = "NORMAL",
                 env: Mapping[str, str] | None = None) -> None:
        self.project = project
        self.root = project.root
        self.state_path = Path(state) if state is not None else self.root / project.config.paths.state
        self.env = env
        self._synchronous = synchronous
        self._db: StateDB | None = None
        self._portal: Portal | None = None
        self._lock = threading.RLock()
        self._bundles: dict[str, Bundle] = {}
        self._compiled: dict[tuple[str, bool], Any] = {}
        self._registries: dict[str, Any] = {}
        self._hashes: dict[int, tuple[Bundle, str, str]] = {}  # id -> (bundle, digest, JSON)
        self._saved: set[str] = set()  # digests this process has stored in `definitions`
        self._validated = False

    @classmethod
    def open(cls, path: Path | str = ".", *, state: Path | str | None = None, synchronous: str = "NORMAL",
             env: Mapping[str, str] | None = None) -> Yard:
        """Open the yard without validating it first: for resuming and looking at runs, which use
        the definitions stored with each run, not the files. Validation happens on the first new run."""
        return cls(load_project(Path(path)), state=state, synchronous=synchronous, env=env)

    def validate(self) -> None:
        """Raise ValidationFailed when the yard's files have errors (done once)."""
        from engine.validate.semantic import check_project

        if self._validated:
            return
        diagnostics = [*self.project.diagnostics]
        if self.project.ok:
            diagnostics.extend(check_project(self.project))
        if any(d.severity == "error" for d in diagnostics):
            raise ValidationFailed(sorted(diagnostics))
        self._validated = True

    @classmethod
    def load(cls, path: Path | str = ".", *, state: Path | str | None = None, synchronous: str = "NORMAL",
             env: Mapping[str, str] | None = None) -> Yard:
        """Load and validate the yard at `path`; raises ValidationFailed with every diagnostic."""
        yard = cls.open(path, state=state, synchronous=synchronous, env=env)
        yard.validate()
        return yard

    # ---- resources --------------------------------------------------------------------------

    @property
    def db(self) -> StateDB:
        """The state database, opened on first use."""
        with self._lock:
            if self._db is None:
                try:
                    self._db = StateDB(self.state_path, synchronous=self._synchronous)
                except sqlite3.Error as exc:
                    raise StateError(f"cannot open the state database {self.state_path}: {exc}") from None
            return self._db

    def close(self) -> None:
        """Commit what is pending and release the database and the private loop."""
        with self._lock:
            if self._portal is not None:
                self._portal.close()
                self._portal = None
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> Yard:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Yard:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    def _sync(self) -> Portal:
        with self._lock:
            if self._portal is None:
                self._portal = Portal()
            return self._portal

    # ---- definitions ------------------------------------------------------------------------

    def bundle(self, name: str) -> Bundle:
        """The flow `name` as the files define it now, pinned with its blocks and config."""
        self.validate()
        with self._lock:
            if name not in self._bundles:
                self._bundles[name] = make_bundle(self.project, name)
            return self._bundles[name]

    def _pin(self, bundle: Bundle) -> tuple[str, str]:
        """(digest, JSON) of a bundle, computed once per bundle object (hashing serializes it all)."""
        with self._lock:
            known = self._hashes.get(id(bundle))
            if known is None:
                if len(self._hashes) > 256:
                    self._hashes.clear()
                known = self._hashes[id(bundle)] = (bundle, bundle.digest, bundle.to_json())
            return known[1], known[2]

    def compiled(self, bundle: Bundle, *, durable: bool = True) -> Any:
        """The CompiledFlow of a bundle (cached per content hash), with our checkpointer if durable."""
        from engine.compile import compile_flow

        key = (self._pin(bundle)[0], durable)
        with self._lock:
            if key not in self._compiled:
                saver = self.db.saver if durable else None
                self._compiled[key] = compile_flow(bundle, checkpointer=saver)
            return self._compiled[key]

    def compile(self, name: str) -> Any:
        """The LangGraph compiled graph of flow `name`, for inspection (no checkpointer)."""
        return self.compiled(self.bundle(name), durable=False).graph

    def _context(self, bundle: Bundle, run_id: str) -> tuple[RunContext, str | None]:
        from engine.models import ModelResolver
        from engine.tools import build_registry

        config_key = store.dumps(bundle.source.get("config") or {})
        with self._lock:
            registry = self._registries.get(config_key)
            if registry is None:
                registry = self._registries[config_key] = build_registry(bundle.config, self.root)
        workspace = self.state_path.parent / "workspaces" / run_id
        models = ModelResolver(bundle.config, self.env, run_id=run_id)
        context = RunContext(run_id=run_id, models=models, tools=registry.with_workspace(workspace),
                             workspace=workspace)
        return context, models.default_note if _uses_default_model(bundle) else None

    # ---- runs -------------------------------------------------------------------------------

    async def _start(self, name: str, inputs: Mapping[str, Any] | None, run_id: str | None) -> Execution:
        from engine.typecheck import coerce_inputs

        bundle = self.bundle(name)
        values = coerce_inputs(bundle.flow.inputs, dict(inputs or {}), where=f"flow '{name}'")
        compiled = self.compiled(bundle)
        digest, text = self._pin(bundle)
        chosen = check_run_id(run_id) if run_id is not None else None
        me = owner.current()
        for _attempt in range(5):
            now = now_iso()
            record = RunRecord(id=chosen or new_run_id(), flow=bundle.name, version=bundle.version,
                               digest=digest, status="running", inputs=values, owner_pid=me.pid,
                               owner_host=me.host, owner_start=me.start, created=now, started=now)
            writes = [store.insert_run(record)]
            if digest not in self._saved:
                writes.insert(0, store.save_definition(digest, bundle.name, bundle.version, text, now))
            try:
                await self.db.writer.write(*writes)
                self._saved.add(digest)
                break
            except sqlite3.IntegrityError:
                if chosen is not None:
                    raise UsageError(f"run id '{chosen}' is already taken (see `blockyard runs show {chosen}`)") \
                        from None
            except sqlite3.Error as exc:
                raise StateError(f"cannot record a new run in {self.state_path}: {exc}") from None
        else:  # pragma: no cover - five generated ids taken in a row
            raise StateError("could not allocate a unique run id")
        context, note = self._context(bundle, record.id)
        return Execution(self.db, compiled, record, context, compiled.initial_state(values),
                         started_data={"note": note} if note else {})

    async def _continue(self, run_id: str) -> Execution:
        record = await self.db.aread(lambda conn: store.get_run(conn, run_id))
        if record is None:
            known = await self.db.aread(store.run_ids)
            raise UsageError(f"unknown run '{run_id}'{did_you_mean(run_id, known)}")
        _check_resumable(record)
        text = await self.db.aread(lambda conn: store.load_definition(conn, record.digest))
        if text is None:
            raise StateError(f"run {run_id}: its definition {record.digest} is missing from the state database")
        bundle = Bundle.from_json(text)
        with self._lock:  # the stored digest is the definition's identity: no need to hash it again
            self._hashes[id(bundle)] = (bundle, record.digest, text)
        compiled = self.compiled(bundle)
        me = owner.current()
        if not await self.db.writer.call(store.claim(run_id, record, me.pid, me.host, me.start)):
            raise UsageError(f"run {run_id} was just resumed by another process")
        config = {"configurable": {"thread_id": run_id}}
        state = await compiled.graph.aget_state(config)
        if state.created_at is None:  # died before its first checkpoint: start over from its inputs
            start: Any = compiled.initial_state(record.inputs)
        else:
            start = None
        last = await self.db.aread(lambda conn: store.last_seq(conn, run_id))
        context, note = self._context(bundle, run_id)
        data: dict[str, Any] = {"resumed": True}
        if note:
            data["note"] = note
        return Execution(self.db, compiled, record, context, start, last_seq=last, started_data=data,
                         values=dict(state.values) if state.values else None)

    async def astream(self, name: str, inputs: Mapping[str, Any] | None = None, *,
                      run_id: str | None = None) -> AsyncIterator[Event]:
        """Start a run of flow `name` and yield its events, the last one terminal."""
        execution = await self._start(name, inputs, run_id)
        async with aclosing(execute(execution)) as events:
            async for event in events:
                yield event

    async def astream_resume(self, run_id: str) -> AsyncIterator[Event]:
        """Continue a failed, interrupted or crashed run from its last checkpoint; yield its events."""
        execution = await self._continue(run_id)
        async with aclosing(execute(execution)) as events:
            async for event in events:
                yield event

    async def arun(self, name: str, inputs: Mapping[str, Any] | None = None, *,
                   run_id: str | None = None) -> RunResult:
        """Run flow `name` to its end (finished, failed or waiting for approval)."""
        return await _collect(await self._start(name, inputs, run_id))

    async def aresume(self, run_id: str) -> RunResult:
        """Continue a failed, interrupted or crashed run from its last checkpoint, on its pinned definition."""
        return await _collect(await self._continue(run_id))

    def run(self, name: str, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None) -> RunResult:
        """Sync `arun`."""
        return self._sync().call(lambda: self.arun(name, inputs, run_id=run_id))

    def resume(self, run_id: str) -> RunResult:
        """Sync `aresume`."""
        return self._sync().call(lambda: self.aresume(run_id))

    # ---- looking at runs --------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord | None:
        return self.db.read(lambda conn: store.get_run(conn, run_id))

    def runs(self, *, flow: str | None = None, status: str | None = None, limit: int | None = 50) -> list[RunRecord]:
        """Runs, newest first."""
        return self.db.read(lambda conn: store.list_runs(conn, flow=flow, statuses=[status] if status else None,
                                                         limit=limit))

    def events(self, run_id: str) -> list[Event]:
        """The stored trace of a run (every event but tokens), in order."""
        return self.db.read(lambda conn: store.load_events(conn, run_id))


def _uses_default_model(bundle: Bundle) -> bool:
    """Whether a block of the flow (or its subflows) talks to the `default` model profile."""
    blocks = [*bundle.blocks.values()]
    pending = [*bundle.flows.values()]
    while pending:
        sub = pending.pop()
        blocks.extend(sub.blocks.values())
        pending.extend(sub.flows.values())
    return any(block.kind in MODEL_KINDS and block.model in (None, "default") for block in blocks)


def _check_resumable(record: RunRecord) -> None:
    status = effective_status(record)
    if status == "finished":
        raise UsageError(f"run {record.id} already finished; nothing to resume")
    if status == "running":
        raise UsageError(f"run {record.id} is still running (process {record.owner_pid} on {record.owner_host})")
    if status == "waiting":
        raise UsageError(f"run {record.id} is waiting for an approval decision, which this version cannot "
                         "give yet")


async def _collect(execution: Execution) -> RunResult:
    kept: list[Event] = []
    async with aclosing(execute(execution)) as events:
        async for event in events:
            if event.type in TERMINAL_TYPES or event.type == APPROVAL_REQUIRED:
                kept.append(event)
    return RunResult.from_events(execution.run, kept)
