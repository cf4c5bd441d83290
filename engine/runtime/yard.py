"""The Python API: load a yard, run flows by name, stream events, resume runs.

    from engine import Yard
    with Yard.load(".") as yard:
        result = yard.run("hello", {"name": "Ada"})
        async for event in yard.astream("hello", {"name": "Ada"}): ...

A Yard is the yard's files (loaded, validated once) in front of an `Engine` (engine/runtime/engine.py),
which does the work: it runs the flow the files define now, pinned (`yard.bundle(name)`); to run
another pinned definition, hand it to `yard.engine.astream(bundle, inputs)`. The async methods are
the core; the sync ones run them on a private event loop (engine/runtime/sync.py), so they work
inside a running loop too. One Yard holds one connection pair to the state database and is safe
to share between threads and event loops. See docs/runtime.md.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from engine import telemetry
from engine.compile import CompiledFlow
from engine.core.diagnostics import Diagnostic
from engine.core.errors import UsageError, ValidationFailed
from engine.core.events import Event, now_iso
from engine.definitions.closure import flow_problems
from engine.definitions.pinned import Bundle, make_bundle
from engine.definitions.project import CONFIG_FILE, Project, load_project
from engine.runtime import approvals
from engine.runtime.approvals import Expired
from engine.runtime.engine import Engine
from engine.runtime.execution import RunResult
from engine.runtime.standalone import standalone_graph
from engine.runtime.sync import SyncLoop
from engine.state import branches, gates, messages, store, threads
from engine.state.checkpointer import StateDB
from engine.state.memory import MemoryStore
from engine.state.store import RunRecord
from engine.state.threads import Thread
from engine.validate.semantic import check_closure, check_config_file, check_project


class Yard:
    """A loaded, validated yard that runs flows durably on its state database."""

    def __init__(
        self,
        project: Project,
        *,
        state: Path | str | None = None,
        synchronous: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.project = project
        self.root = project.root
        self.env = env
        self.engine = Engine.for_project(project, state=state, synchronous=synchronous, env=env)
        self.state_path = self.engine.state_path
        # the API keys of the model profiles (engine/core/redaction.py)
        self.secrets = self.engine.secrets
        # OpenTelemetry traces of its runs, when blockyard.yaml or OTEL_* ask for them (docs/observability.md)
        self.telemetry = telemetry.start(project.config.telemetry)
        if self.telemetry is not None:
            self.engine.observers.append(self.telemetry.observer)
        self._sync_loop: SyncLoop | None = None
        self._lock = threading.RLock()
        self._bundles: dict[str, Bundle] = {}
        self._graphs: dict[
            str, CompiledStateGraph[Any, Any, Any, Any]
        ] = {}  # digest -> standalone graph
        self._diagnostics: list[Diagnostic] | None = None
        self._problems: dict[str, list[Diagnostic]] = {}  # flow -> the errors of its closure

    @classmethod
    def open(
        cls,
        path: Path | str = ".",
        *,
        state: Path | str | None = None,
        synchronous: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Yard:
        """Open the yard without validating it first: for resuming and looking at runs, which use
        the definitions stored with each run, not the files. A flow is validated on its first new run."""
        return cls(load_project(Path(path)), state=state, synchronous=synchronous, env=env)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Every problem of the yard's files, as `blockyard validate` reports them (checked once)."""
        with self._lock:
            if self._diagnostics is None:
                found = [*self.project.diagnostics]
                if not self._config_errors(found):
                    # on a broken config they would be noise
                    found.extend(check_project(self.project))
                self._diagnostics = sorted(set(found))
            return self._diagnostics

    def problems(self, name: str) -> list[Diagnostic]:
        """The errors that keep flow `name` from running: those of its own closure (its file, the
        blocks, subflows and delegated flows it reaches, blockyard.yaml), not of unrelated files.
        Only the closure is checked (`check_closure`): running one flow does not validate the yard."""
        with self._lock:
            if name not in self._problems:
                found = self._diagnostics
                if found is None:
                    found = [*self.project.diagnostics]
                    if not self._config_errors(found):  # on a broken config they would be noise
                        found.extend(check_closure(self.project, name))
                self._problems[name] = flow_problems(self.project, found, name)
            return self._problems[name]

    @staticmethod
    def _config_errors(found: list[Diagnostic]) -> list[Diagnostic]:
        return [d for d in found if d.file == CONFIG_FILE and d.severity == "error"]

    def validate(self, name: str | None = None) -> None:
        """Raise ValidationFailed with the errors of flow `name`'s closure, or with no name when
        the yard has any error at all."""
        whole = name is None  # with a name only the flow's closure is checked (problems)
        problems = (
            [d for d in self.diagnostics if d.severity == "error"]
            if whole
            else self.problems(str(name))
        )
        if problems:
            raise ValidationFailed(problems)

    @classmethod
    def load(
        cls,
        path: Path | str = ".",
        *,
        state: Path | str | None = None,
        synchronous: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Yard:
        """Load and check the yard at `path`. A broken blockyard.yaml (which every flow needs) raises
        ValidationFailed here; a broken flow or block only stops the flows that use it, when they are
        run (`run`, `bundle`, `compile` raise ValidationFailed with that flow's diagnostics)."""
        yard = cls.open(path, state=state, synchronous=synchronous, env=env)
        config = yard._config_errors([*yard.project.diagnostics])
        if not config:  # the checks of blockyard.yaml only: a flow's are made when it first runs
            config = yard._config_errors(check_config_file(yard.project))
        if config:
            raise ValidationFailed(config)
        return yard

    # ---- resources --------------------------------------------------------------------------

    @property
    def db(self) -> StateDB:
        """The state database, opened on first use."""
        return self.engine.db

    @property
    def memory(self) -> MemoryStore:
        """Long-term memory (LangGraph's store in the state database), opened on first use."""
        return self.engine.memory

    def close(self) -> None:
        """Commit what is pending and release the database and the private loop."""
        with self._lock:
            if self._sync_loop is not None:
                self._sync_loop.close()
                self._sync_loop = None
            self.engine.close()
            if self.telemetry is not None:  # the spans of its runs, sent before the command ends
                self.telemetry.flush()

    def __enter__(self) -> Yard:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Yard:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _sync(self) -> SyncLoop:
        with self._lock:
            if self._sync_loop is None:
                self._sync_loop = SyncLoop()
            return self._sync_loop

    # ---- definitions ------------------------------------------------------------------------

    def bundle(self, name: str) -> Bundle:
        """The flow `name` as the files define it now, pinned with its blocks and config; raises
        ValidationFailed when its closure has errors, UsageError when there is no such flow."""
        with self._lock:
            if name not in self._bundles:
                self.validate(name)
                self._bundles[name] = make_bundle(self.project, name)
            return self._bundles[name]

    def pinned(self, bundle: Bundle, digest: str, text: str) -> Bundle:
        """A bundle read back from the state database under its digest (its identity: not hashed again)."""
        return self.engine.pinned(bundle, digest, text)

    def compiled(self, bundle: Bundle, *, durable: bool = True) -> CompiledFlow:
        """The CompiledFlow of a bundle (cached per content hash), with our checkpointer if durable."""
        return self.engine.compiled(bundle, durable=durable)

    def compile(self, name: str) -> CompiledStateGraph[Any, Any, Any, Any]:
        """Flow `name` as a standalone LangGraph graph (cached per definition digest): the flow's
        inputs in, its outputs out; runs with invoke/ainvoke/stream/astream, any checkpointer and
        store, or as a node of another graph (engine/runtime/standalone.py, docs/langgraph.md).
        Building it opens no database."""
        bundle = self.bundle(name)
        digest = self.engine.pin(bundle)[0]
        with self._lock:
            graph = self._graphs.get(digest)
            if graph is None:
                compiled = self.compiled(bundle, durable=False)
                graph = self._graphs[digest] = standalone_graph(
                    compiled, lambda run_id: self.engine.context(bundle, run_id)[0]
                )
            return graph

    # ---- runs -------------------------------------------------------------------------------

    async def astream(
        self,
        name: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        after: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Start a run of flow `name` (a turn of conversation `thread`) and yield its events, the last
        one terminal. `output_dir`: the yard folder its file tools write to (instead of the flow's
        `output_dir`, or the run's workspace); `durability` (sync, async, exit, none) and `trace`
        (False: no trace, with durability none) instead of the flow's and the yard's
        (docs/runtime.md, "Durability"). `after`: the finished turn of `thread` the turn goes on
        from, when not its latest (docs/memory.md, "Branches")."""
        async with aclosing(
            self.engine.astream(
                self.bundle(name),
                inputs,
                run_id=run_id,
                thread=thread,
                output_dir=output_dir,
                durability=durability,
                trace=trace,
                branch=branches.TurnStart(after=after),
            )
        ) as events:
            async for event in events:
                yield event

    async def astream_resume(
        self,
        run_id: str,
        *,
        approve: bool | None = None,
        values: Mapping[str, Any] | None = None,
        reason: str | None = None,
        gate: str | None = None,
        actor: str | None = None,
        budget: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Decide the gate a run waits at (`approve=True/False`, with field `values`, a `reason`, which
        `gate`, who decides as `actor`), or with no decision continue a failed or interrupted run from
        its last checkpoint; yield its events. A refused decision raises DecisionRefused and changes
        nothing. `budget` raises limits of the run's budget first (`{"tokens": 50000, "per_turn.cost_usd":
        0.5}`: docs/observability.md, "Budgets")."""
        wanted = approvals.ask(approve, values, reason, gate, actor)
        async with aclosing(self.engine.astream_resume(run_id, wanted, budget=budget)) as events:
            async for event in events:
                yield event

    async def arun(
        self,
        name: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        after: str | None = None,
    ) -> RunResult:
        """Run flow `name` to its end (finished, failed or waiting for approval); see `astream`.
        `after`: the finished turn of `thread` this turn goes on from, when not its latest — the
        thread branches (docs/memory.md, "Branches"); `"__start__"`: a new first turn."""
        return await self.engine.arun(
            self.bundle(name),
            inputs,
            run_id=run_id,
            thread=thread,
            output_dir=output_dir,
            durability=durability,
            trace=trace,
            branch=branches.TurnStart(after=after),
        )

    async def aresume(
        self,
        run_id: str,
        *,
        approve: bool | None = None,
        values: Mapping[str, Any] | None = None,
        reason: str | None = None,
        gate: str | None = None,
        actor: str | None = None,
        budget: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """`astream_resume` to the end of the execution, on the run's pinned definition."""
        return await self.engine.aresume(
            run_id, approvals.ask(approve, values, reason, gate, actor), budget=budget
        )

    def run(
        self,
        name: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        after: str | None = None,
    ) -> RunResult:
        """Sync `arun`."""
        return self._sync().call(
            lambda: self.arun(
                name,
                inputs,
                run_id=run_id,
                thread=thread,
                output_dir=output_dir,
                durability=durability,
                trace=trace,
                after=after,
            )
        )

    def resume(
        self,
        run_id: str,
        *,
        approve: bool | None = None,
        values: Mapping[str, Any] | None = None,
        reason: str | None = None,
        gate: str | None = None,
        actor: str | None = None,
        budget: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Sync `aresume`: `yard.resume(run_id, approve=True, values={"restaurant": "Chipotle"})`."""
        return self._sync().call(
            lambda: self.aresume(
                run_id,
                approve=approve,
                values=values,
                reason=reason,
                gate=gate,
                actor=actor,
                budget=budget,
            )
        )

    async def aexpire_gates(self, now: datetime | None = None) -> list[Expired]:
        """Decide every waiting gate whose timeout has passed at `now` (default: now) by its
        `on_timeout`, and continue those runs; one Expired per gate decided."""
        return await self.engine.expire(now)

    def expire_gates(self, now: datetime | None = None) -> list[Expired]:
        """Sync `aexpire_gates` (what `blockyard gates --expire` does, e.g. from cron)."""
        return self._sync().call(lambda: self.aexpire_gates(now))

    async def aexpire_approvals(self, now: datetime | None = None) -> int:
        """`aexpire_gates` counted."""
        return len(await self.aexpire_gates(now))

    # ---- looking at runs --------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord | None:
        return self.db.read(lambda conn: store.get_run(conn, run_id))

    def runs(
        self, *, flow: str | None = None, status: str | None = None, limit: int | None = 50
    ) -> list[RunRecord]:
        """Runs, newest first."""
        return self.db.read(
            lambda conn: store.list_runs(
                conn, flow=flow, statuses=[status] if status else None, limit=limit
            )
        )

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

    def thread(self, thread_id: str) -> Thread | None:
        return self.db.read(lambda conn: threads.get_thread(conn, thread_id))

    def create_thread(self, thread_id: str, flow: str | None = None) -> Thread:
        """A conversation thread with no turns yet (as `POST /threads`), for flow `flow` or, without
        one, for the flow of its first turn; UsageError for an id that is taken or a flow the yard
        does not have."""
        threads.check_thread_id(thread_id)
        if flow is not None:
            self.bundle(flow)  # UsageError naming the flows there are
        made = self.db.writer.call_sync(threads.create(thread_id, flow, now_iso()))
        if made is None:
            raise UsageError(f"thread '{thread_id}' already exists")
        return made

    def delete_thread(self, thread_id: str) -> bool:
        """Delete a thread with its messages and checkpoints, freeing its id (as `DELETE /threads/{id}`);
        False when there is no such thread, UsageError while a turn of it runs or waits for approval.
        Its runs keep their traces and can no longer be resumed."""
        outcome = self.db.writer.call_sync(
            threads.delete(thread_id, self.db.saver.delete_thread_writes(thread_id))
        )
        if isinstance(outcome, threads.Busy):
            raise UsageError(
                f"thread '{thread_id}' cannot be deleted: its run {outcome.run_id} is {outcome.status}"
            )
        return outcome

    def history(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        limit: int = messages.PAGE,
        newest: bool = False,
    ) -> list[messages.Message]:
        """A page of a thread's conversation from the messages table, oldest first: the messages
        after index `after`; with `newest`, the last `limit` (before `after`)."""
        return self.db.read(
            lambda conn: messages.history(conn, thread_id, after=after, limit=limit, newest=newest)
        )
