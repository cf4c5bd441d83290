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
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from engine.bundle import Bundle, make_bundle
from engine.closure import flow_problems
from engine.compile.context import RunContext
from engine.compile.reduce import empty
from engine.diagnostics import Diagnostic
from engine.errors import UsageError, ValidationFailed
from engine.outputdir import normalized, resolve_output_dir
from engine.project import CONFIG_FILE, Project, load_project
from engine.redaction import KNOWN, Masker, key_values, key_variables
from engine.runtime import approvals, gates, owner, resumes, store, threads, written
from engine.runtime.approvals import Expired
from engine.runtime.endings import end_hook
from engine.runtime.events import APPROVAL_REQUIRED, TERMINAL_TYPES, Event, now_iso
from engine.runtime.ids import check_run_id, new_run_id
from engine.runtime.memory import MemoryStore, render_scope
from engine.runtime.portal import Portal
from engine.runtime.runner import Execution, RunResult, execute
from engine.runtime.savers import StateDB
from engine.runtime.store import RunRecord, StateError
from engine.spec.block import MODEL_KINDS
from engine.template_limits import TemplateLimits


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
        self._memory: MemoryStore | None = None
        self._portal: Portal | None = None
        self._lock = threading.RLock()
        self._bundles: dict[str, Bundle] = {}
        self._compiled: dict[tuple[str, bool], Any] = {}
        self._registries: dict[str, Any] = {}
        self._hashes: dict[int, tuple[Bundle, str, str]] = {}  # id -> (bundle, digest, JSON)
        self._saved: set[str] = set()  # digests this process has stored in `definitions`
        self._diagnostics: list[Diagnostic] | None = None
        self.secrets = Masker()  # the API keys of the yard's model profiles (engine/redaction.py)
        self._mask_keys(project.config.models.values())

    def _mask_keys(self, profiles: Any) -> None:
        keys = key_values(key_variables(profiles), self.env)
        self.secrets.add(keys)
        KNOWN.add(keys)

    @classmethod
    def open(cls, path: Path | str = ".", *, state: Path | str | None = None, synchronous: str = "NORMAL",
             env: Mapping[str, str] | None = None) -> Yard:
        """Open the yard without validating it first: for resuming and looking at runs, which use
        the definitions stored with each run, not the files. A flow is validated on its first new run."""
        return cls(load_project(Path(path)), state=state, synchronous=synchronous, env=env)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Every problem of the yard's files, as `blockyard validate` reports them (checked once)."""
        from engine.validate.semantic import check_project

        with self._lock:
            if self._diagnostics is None:
                found = [*self.project.diagnostics]
                if not any(d.file == CONFIG_FILE and d.severity == "error" for d in found):
                    found.extend(check_project(self.project))  # on a broken config they would be noise
                self._diagnostics = sorted(set(found))
            return self._diagnostics

    def problems(self, name: str) -> list[Diagnostic]:
        """The errors that keep flow `name` from running: those of its own closure (its file, the
        blocks, subflows and delegated flows it reaches, blockyard.yaml), not of unrelated files."""
        return flow_problems(self.project, self.diagnostics, name)

    def validate(self, name: str | None = None) -> None:
        """Raise ValidationFailed with the errors of flow `name`'s closure, or with no name when
        the yard has any error at all."""
        errors = [d for d in self.diagnostics if d.severity == "error"]
        problems = self.problems(name) if name is not None else errors
        if problems:
            raise ValidationFailed(problems)

    @classmethod
    def load(cls, path: Path | str = ".", *, state: Path | str | None = None, synchronous: str = "NORMAL",
             env: Mapping[str, str] | None = None) -> Yard:
        """Load and check the yard at `path`. A broken blockyard.yaml (which every flow needs) raises
        ValidationFailed here; a broken flow or block only stops the flows that use it, when they are
        run (`run`, `bundle`, `compile` raise ValidationFailed with that flow's diagnostics)."""
        yard = cls.open(path, state=state, synchronous=synchronous, env=env)
        config = [d for d in yard.diagnostics if d.file == CONFIG_FILE and d.severity == "error"]
        if config:
            raise ValidationFailed(config)
        return yard

    # ---- resources --------------------------------------------------------------------------

    @property
    def db(self) -> StateDB:
        """The state database, opened on first use."""
        with self._lock:
            if self._db is None:
                try:
                    self._db = StateDB(self.state_path, synchronous=self._synchronous, secrets=self.secrets)
                except sqlite3.Error as exc:
                    raise StateError(f"cannot open the state database {self.state_path}: {exc}") from None
            return self._db

    @property
    def memory(self) -> MemoryStore:
        """Long-term memory (LangGraph's store in the state database), opened on first use."""
        with self._lock:
            if self._memory is None:
                self._memory = MemoryStore(self.state_path)
            return self._memory

    def close(self) -> None:
        """Commit what is pending and release the database and the private loop."""
        with self._lock:
            if self._portal is not None:
                self._portal.close()
                self._portal = None
            if self._db is not None:
                self._db.close()
                self._db = None
            if self._memory is not None:
                self._memory.close()
                self._memory = None

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
        """The flow `name` as the files define it now, pinned with its blocks and config; raises
        ValidationFailed when its closure has errors, UsageError when there is no such flow."""
        with self._lock:
            if name not in self._bundles:
                self.validate(name)
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

    def pinned(self, bundle: Bundle, digest: str, text: str) -> Bundle:
        """A bundle read back from the state database under its digest (its identity: not hashed again)."""
        with self._lock:
            self._hashes[id(bundle)] = (bundle, digest, text)
        return bundle

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

    def _context(self, bundle: Bundle, run_id: str, thread_id: str | None = None,
                 output_dir: str | None = None) -> tuple[RunContext, str | None]:
        from engine.models import ModelResolver
        from engine.tools import build_registry

        config_key = store.dumps(bundle.source.get("config") or {})
        with self._lock:
            registry = self._registries.get(config_key)
            if registry is None:
                registry = self._registries[config_key] = build_registry(bundle.config, self.root)
        if output_dir is None:
            workspace = self.state_path.parent / "workspaces" / run_id
            tools = registry.with_workspace(workspace)
        else:  # a folder of the yard (checked when the run started), which the file tools keep inside it
            workspace = self.root / output_dir
            tools = registry.with_workspace(workspace, confine=self.root)
        models = ModelResolver(bundle.config, self.env, run_id=run_id)
        self._mask_keys(_profiles(bundle))  # a pinned definition may name other variables than the files now
        context = RunContext(run_id=run_id, models=models, tools=tools,
                             workspace=workspace, thread_id=thread_id, secrets=self.secrets,
                             limits=TemplateLimits.of(bundle.config))
        if output_dir is not None:
            context.extra["output_dir"] = output_dir
        return context, models.default_note if _uses_default_model(bundle) else None

    # ---- runs -------------------------------------------------------------------------------

    async def _start(self, name: str, inputs: Mapping[str, Any] | None, run_id: str | None,
                     thread: str | None = None, output_dir: str | None = None) -> Execution:
        from engine.typecheck import coerce_inputs

        bundle = self.bundle(name)
        values = coerce_inputs(bundle.flow.inputs, dict(inputs or {}), where=f"flow '{name}'")
        chosen_dir = output_dir if output_dir is not None else bundle.flow.output_dir
        if chosen_dir is not None:  # refused before the run exists: a usage error, not a failed run
            resolve_output_dir(self.root, chosen_dir, "--output" if output_dir is not None else "output_dir")
            chosen_dir = normalized(chosen_dir)
        render_scope(bundle, values)  # a scope that does not render refuses the run before it exists
        compiled = self.compiled(bundle)
        digest, text = self._pin(bundle)
        chosen = check_run_id(run_id) if run_id is not None else None
        thread_id = threads.check_thread_id(thread) if thread is not None else None
        me = owner.current()
        for _attempt in range(5):
            now = now_iso()
            record = RunRecord(id=chosen or new_run_id(), flow=bundle.name, version=bundle.version,
                               digest=digest, status="running", inputs=values, thread_id=thread_id,
                               owner_pid=me.pid, owner_host=me.host, owner_start=me.start, created=now, started=now)
            writes = [store.insert_run(record)]
            if digest not in self._saved:
                writes.insert(0, store.save_definition(digest, bundle.name, bundle.version, text, now))
            try:
                if thread_id is None:
                    await self.db.writer.write(*writes)
                else:  # one turn at a time: admitted only while no other run of the thread goes on
                    admit = threads.admit(thread_id, bundle.name, threads.title_of(threads.turn_text(values)),
                                          writes, record.id, now)
                    await threads.wait_turn(lambda admit=admit: self.db.writer.call(admit), thread_id)
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
        if thread_id is None:
            self.db.saver.expect_new(record.id)  # its checkpoint thread is the run id: nothing to read
        start = threads.turn_state(values, record.id, empty(compiled.accumulated)) if thread_id \
            else compiled.initial_state(values)
        return await self.execution(bundle, compiled, record, start, output_dir=chosen_dir)

    async def execution(self, bundle: Bundle, compiled: Any, record: RunRecord, start: Any, *, last_seq: int = 0,
                        resumed: bool = False, values: dict[str, Any] | None = None,
                        preface: list[Event] | None = None, pending: dict[str, Any] | None = None,
                        output_dir: str | None = None) -> Execution:
        """One execution of `record`: its run context (models, tools, memory) and end hook. A resumed
        run writes its files where it started writing them (recorded in its first run_started event)."""
        if resumed:
            output_dir = await self.db.aread(lambda conn: written.output_dir_of(conn, record.id))
        context, note = self._context(bundle, record.id, record.thread_id, output_dir)
        scope = render_scope(bundle, record.inputs)
        if scope is not None:
            context.memory = await self.memory.open(scope, bundle.name, record.id)
        data: dict[str, Any] = {"resumed": True} if resumed else {}
        if output_dir is not None:
            data["output_dir"] = output_dir
        if note:
            data["note"] = note
        if record.thread_id:
            data["thread"] = record.thread_id
        return Execution(self.db, compiled, record, context, start, last_seq=last_seq, started_data=data,
                         values=values, preface=list(preface or []), pending=pending,
                         on_end=end_hook(self.db, compiled.graph, record, context.memory))

    async def _continue(self, run_id: str, wanted: approvals.Ask | None = None) -> Execution:
        return await resumes.prepare(self, run_id, wanted)

    async def astream(self, name: str, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
                      thread: str | None = None, output_dir: str | None = None) -> AsyncIterator[Event]:
        """Start a run of flow `name` (a turn of conversation `thread`) and yield its events, the last
        one terminal. `output_dir`: the yard folder its file tools write to (instead of the flow's
        `output_dir`, or the run's workspace)."""
        execution = await self._start(name, inputs, run_id, thread, output_dir)
        async with aclosing(execute(execution)) as events:
            async for event in events:
                yield event

    async def astream_resume(self, run_id: str, *, approve: bool | None = None,
                             values: Mapping[str, Any] | None = None, reason: str | None = None,
                             gate: str | None = None, actor: str | None = None) -> AsyncIterator[Event]:
        """Decide the gate a run waits at (`approve=True/False`, with field `values`, a `reason`, which
        `gate`, who decides as `actor`), or with no decision continue a failed or interrupted run from
        its last checkpoint; yield its events. A refused decision raises DecisionRefused and changes
        nothing."""
        execution = await self._continue(run_id, approvals.ask(approve, values, reason, gate, actor))
        async with aclosing(execute(execution)) as events:
            async for event in events:
                yield event

    async def arun(self, name: str, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
                   thread: str | None = None, output_dir: str | None = None) -> RunResult:
        """Run flow `name` to its end (finished, failed or waiting for approval)."""
        return await collect(await self._start(name, inputs, run_id, thread, output_dir))

    async def aresume(self, run_id: str, *, approve: bool | None = None, values: Mapping[str, Any] | None = None,
                      reason: str | None = None, gate: str | None = None, actor: str | None = None) -> RunResult:
        """`astream_resume` to the end of the execution, on the run's pinned definition."""
        return await collect(await self._continue(run_id, approvals.ask(approve, values, reason, gate, actor)))

    def run(self, name: str, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
            thread: str | None = None, output_dir: str | None = None) -> RunResult:
        """Sync `arun`."""
        return self._sync().call(lambda: self.arun(name, inputs, run_id=run_id, thread=thread, output_dir=output_dir))

    def resume(self, run_id: str, *, approve: bool | None = None, values: Mapping[str, Any] | None = None,
               reason: str | None = None, gate: str | None = None, actor: str | None = None) -> RunResult:
        """Sync `aresume`: `yard.resume(run_id, approve=True, values={"restaurant": "Chipotle"})`."""
        return self._sync().call(lambda: self.aresume(run_id, approve=approve, values=values, reason=reason,
                                                      gate=gate, actor=actor))

    async def aexpire_gates(self, now: datetime | None = None) -> list[Expired]:
        """Decide every waiting gate whose timeout has passed at `now` (default: now) by its
        `on_timeout`, and continue those runs; one Expired per gate decided."""
        return await resumes.expire(self, now)

    def expire_gates(self, now: datetime | None = None) -> list[Expired]:
        """Sync `aexpire_gates` (what `blockyard gates --expire` does, e.g. from cron)."""
        return self._sync().call(lambda: self.aexpire_gates(now))

    async def aexpire_approvals(self, now: datetime | None = None) -> int:
        """`aexpire_gates` counted: the hook `blockyard serve` calls from its housekeeping."""
        return len(await self.aexpire_gates(now))

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

    def gates(self, run_id: str | None = None) -> list[gates.Gate]:
        """Every gate of run `run_id` (decided ones too), or with no run every gate waiting now."""
        if run_id is None:
            return self.db.read(gates.waiting)
        return self.db.read(lambda conn: gates.of_run(conn, run_id))

    def threads(self, *, flow: str | None = None, limit: int | None = 50) -> list[threads.Thread]:
        """Conversation threads, most recently active first."""
        return self.db.read(lambda conn: threads.list_threads(conn, flow=flow, limit=limit))


def _blocks(bundle: Bundle) -> list[Any]:
    """The blocks of a flow and of its subflows."""
    blocks = [*bundle.blocks.values()]
    pending = [*bundle.flows.values()]
    while pending:
        sub = pending.pop()
        blocks.extend(sub.blocks.values())
        pending.extend(sub.flows.values())
    return blocks


def _uses_default_model(bundle: Bundle) -> bool:
    """Whether a block of the flow (or its subflows) talks to the `default` model profile."""
    return any(block.kind in MODEL_KINDS and block.model in (None, "default") for block in _blocks(bundle))


def _profiles(bundle: Bundle) -> list[Any]:
    """Every model profile a run of the flow may use: blockyard.yaml's, and blocks' inline ones."""
    inline = [block.model for block in _blocks(bundle) if block.model is not None and not isinstance(block.model, str)]
    return [*bundle.config.models.values(), *inline]


async def collect(execution: Execution) -> RunResult:
    """Run an execution to its end; its result."""
    kept: list[Event] = []
    async with aclosing(execute(execution)) as events:
        async for event in events:
            if event.type in TERMINAL_TYPES or event.type == APPROVAL_REQUIRED:
                kept.append(event)
    return RunResult.from_events(execution.run, kept)
