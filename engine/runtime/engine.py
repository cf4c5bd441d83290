"""The engine: runs pinned flows durably on one state database.

It owns what runs need in one process: the state database (engine/state/), the memory store,
the compiled flows (cached per definition digest) and the tool registries (per config). It
starts runs of a given pinned Bundle, goes on with runs that stopped (with a decision on a gate,
or after a crash or failure) and decides gates past their timeout. It never reads the yard's
files: the Python API (`Yard`, engine/runtime/yard.py) picks the bundle from the files, the
server (engine/serve/) from its catalog, and a resume uses the bundle stored with the run.

    engine = Engine.for_project(project)
    async for event in engine.astream(bundle, {"name": "Ada"}): ...

One Engine holds one connection pair to the state database and is safe to share between threads
and event loops; `close()` commits what is pending and releases it.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import AsyncGenerator, Iterable, Mapping
from contextlib import aclosing
from datetime import datetime
from pathlib import Path
from typing import Any

from langgraph.types import Command

from engine.compile import CompiledFlow, compile_flow
from engine.compile.reduce import empty
from engine.core import later
from engine.core.errors import UsageError
from engine.core.events import Event, RunStatus, now_iso
from engine.core.redaction import KNOWN, Masker, key_values, key_variables
from engine.core.usage import Spend
from engine.definitions.outputdir import normalized, prompt_files, reserved, resolve_output_dir
from engine.definitions.pinned import Bundle
from engine.definitions.project import Project
from engine.models import ModelResolver
from engine.nodes.context import RunContext
from engine.nodes.spend import RunSpend
from engine.runtime import approvals, naming, resumes, turns
from engine.runtime.approvals import Ask, Expired
from engine.runtime.bundles import (
    history_window,
    model_profiles,
    run_budget,
    run_mode,
    uses_default_model,
)
from engine.runtime.direct_runs import plan_for
from engine.runtime.end_hooks import end_hook
from engine.runtime.execution import Execution, RunResult, collect, execute
from engine.runtime.memory import render_scope
from engine.runtime.observe import Observer
from engine.spec import ModelProfile
from engine.spec.budget import BudgetSpec, raised
from engine.spec.decisions import DecisionRefused
from engine.spec.durability import NO_CHECKPOINTS, synchronous_of
from engine.spec.typecheck import coerce_inputs
from engine.state import (
    branches,
    gates,
    liveness,
    messages,
    store,
    thread_inputs,
    threads,
    written,
)
from engine.state.checkpointer import StateDB
from engine.state.database import DB_ERRORS, INTEGRITY_ERRORS, StateError
from engine.state.ids import check_run_id, new_run_id
from engine.state.location import SCHEMES, Location, locate
from engine.state.memory import MemoryStore
from engine.state.store import RunRecord
from engine.state.synchronous import level as commit_level
from engine.templates.limits import TemplateLimits
from engine.tools import ToolRegistry, build_registry


class Engine:
    """Runs pinned flows durably on the state database: the SQLite file at `state_path`, or the
    Postgres database `database` names (a URL; BLOCKYARD_DATABASE_URL wins over both:
    engine/state/location.py); `root` is the yard's folder (where its Python tools live) and
    `env` replaces `os.environ` for model keys."""

    def __init__(
        self,
        root: Path,
        state_path: Path,
        *,
        synchronous: str | None = None,
        env: Mapping[str, str] | None = None,
        database: str | None = None,
    ) -> None:
        self.root = root
        self.state_path = (
            state_path  # with Postgres too: the yard's local folders (workspaces) sit beside it
        )
        self.location: Location = locate(state_path, database)
        self.env = env
        # the API keys of the model profiles runs use (engine/core/redaction.py)
        self.secrets = Masker()
        # the disk guarantee of the state database's commits (engine/state/synchronous.py): the program's
        # choice, else blockyard.yaml's (`for_project`), else NORMAL; a flow may ask for its own
        self._synchronous = synchronous or "NORMAL"
        self._synchronous_chosen = synchronous is not None
        self._db: StateDB | None = None
        self._memory: MemoryStore | None = None
        self._lock = threading.RLock()
        self._compiled: dict[tuple[str, bool, bool], CompiledFlow] = {}
        self._registries: dict[str, ToolRegistry] = {}
        self._hashes: dict[int, tuple[Bundle, str, str]] = {}  # id -> (bundle, digest, JSON)
        self._gates: dict[str, str | None] = {}  # digest -> the first step a run of it may pause at
        self._saved: set[str] = set()  # digests this process has stored in `definitions`
        # False (flow tests): runs write their files to their own workspace beside the state database,
        # whatever the flow's `output_dir` says, so tests never write into the yard
        self.output_dirs = True
        # the prompt files of the yard's blocks when it was loaded: an output folder never overlaps their
        # folders (engine/definitions/outputdir.py), nor those a run's own bundle pins
        self.prompt_files: frozenset[str] = frozenset()
        # told every event of every execution (engine/runtime/observe.py): telemetry export, metrics
        self.observers: list[Observer] = []
        # W3C traceparents of HTTP callers by run id: the run's next execution here continues the caller's trace
        # (engine/telemetry; set by the server, taken by `execution`)
        self.traceparents: dict[str, str] = {}

    @classmethod
    def for_project(
        cls,
        project: Project,
        *,
        state: Path | str | None = None,
        synchronous: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Engine:
        """The engine of a loaded yard: its state database (`database` or `paths.state` unless `state`,
        a file or a Postgres URL, is given),
        with the keys of its model profiles masked from the start."""
        database = project.config.database
        if isinstance(state, str) and state.startswith(SCHEMES):  # a Postgres URL instead of a file
            database, state = state, None
        path = Path(state) if state is not None else project.root / project.config.paths.state
        engine = cls(
            project.root,
            path,
            synchronous=synchronous or project.config.synchronous,
            env=env,
            database=database,
        )
        engine._synchronous_chosen = synchronous is not None
        engine.mask_keys(project.config.models.values())
        engine.prompt_files = frozenset(
            prompt_files(d.spec for versions in project.blocks.values() for d in versions.values())
        )
        return engine

    def mask_keys(self, profiles: Iterable[ModelProfile]) -> None:
        """Mask the API keys these model profiles read, wherever runs could write them."""
        keys = key_values(key_variables(profiles), self.env)
        self.secrets.add(keys)
        KNOWN.add(keys)

    # ---- resources --------------------------------------------------------------------------

    @property
    def db(self) -> StateDB:
        """The state database, opened on first use."""
        with self._lock:
            if self._db is None:
                try:
                    self._db = StateDB(
                        self.location, synchronous=self._synchronous, secrets=self.secrets
                    )
                except DB_ERRORS as exc:
                    raise StateError(
                        f"cannot open the state database {self.location}: {exc}"
                    ) from None
            return self._db

    @property
    def memory(self) -> MemoryStore:
        """Long-term memory (LangGraph's store in the state database), opened on first use."""
        with self._lock:
            if self._memory is None:
                self._memory = MemoryStore(self.location)
            return self._memory

    def close(self) -> None:
        """Tell the observers what waits (engine/core/later.py), commit what is pending and release the
        database."""
        later.flush()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            if self._memory is not None:
                self._memory.close()
                self._memory = None

    # ---- definitions ------------------------------------------------------------------------

    def pin(self, bundle: Bundle) -> tuple[str, str]:
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

    def compiled(
        self, bundle: Bundle, *, durable: bool = True, inline: bool = False
    ) -> CompiledFlow:
        """A bundle's CompiledFlow (cached by hash): on our checkpointer if `durable`; `inline` for the
        engine's executions (engine/compile/inline.py); the standalone graph and drawings: step by step."""
        key = (self.pin(bundle)[0], durable, inline)
        with self._lock:
            if key not in self._compiled:
                saver = self.db.saver if durable else None
                self._compiled[key] = compile_flow(bundle, checkpointer=saver, inline=inline)
            return self._compiled[key]

    async def stored_bundle(self, digest: str) -> Bundle | None:
        """The definition stored under `digest` (what a run of it started with), or None."""
        text = await self.db.aread(lambda conn: store.load_definition(conn, digest))
        return self.pinned(Bundle.from_json(text), digest, text) if text is not None else None

    def check_output_dir(
        self, bundle: Bundle, text: str, what: str = "output_dir", prompts: Iterable[str] = ()
    ) -> str:
        """The output folder `text` of a run of `bundle`, normalized; UsageError unless it is a folder of
        the yard that overlaps nothing the engine reads (engine/definitions/outputdir.py): its configuration,
        definitions, code, and the folders of the prompt files of the yard, of `bundle` and `prompts`."""
        files = {*self.prompt_files, *bundle.prompts, *prompts}
        resolve_output_dir(self.root, text, what, reserved(bundle.config, files))
        return normalized(text)

    def workspace(self, run_id: str) -> Path:
        """The folder of run `run_id`'s files when it names no output folder."""
        return self.state_path.parent / "workspaces" / run_id

    def context(
        self,
        bundle: Bundle,
        run_id: str,
        thread_id: str | None = None,
        output_dir: str | None = None,
    ) -> tuple[RunContext, str | None]:
        """The run context of one execution (models, tools, workspace, secrets), and the note that the
        default model profile is the mock, when the flow uses it. `output_dir`: the yard folder the
        file tools write to (checked when the run started), else the run's own workspace."""
        config_key = store.dumps(bundle.source.get("config") or {})
        with self._lock:
            registry = self._registries.get(config_key)
            if registry is None:
                registry = self._registries[config_key] = build_registry(bundle.config, self.root)
        if output_dir is None:
            workspace = self.workspace(run_id)
            tools = registry.with_workspace(workspace)
        else:  # a folder of the yard, which the file tools keep inside the yard
            workspace = self.root / output_dir
            tools = registry.with_workspace(workspace, confine=self.root)
        models = ModelResolver(bundle.config, self.env, run_id=run_id)
        # a pinned definition may name other variables than the files now
        self.mask_keys(model_profiles(bundle))
        context = RunContext(
            run_id=run_id,
            models=models,
            tools=tools,
            workspace=workspace,
            thread_id=thread_id,
            secrets=self.secrets,
            limits=TemplateLimits.of(bundle.config),
        )
        if output_dir is not None:
            context.extra["output_dir"] = output_dir
        return context, models.default_note if uses_default_model(bundle) else None

    # ---- starting and going on --------------------------------------------------------------

    def durability(
        self,
        bundle: Bundle,
        durability: str | None = None,
        trace: bool | None = None,
        *,
        thread: bool = False,
    ) -> tuple[str, bool]:
        """The durability mode and whether to keep the trace, for a run of `bundle` that asks for
        `durability` and `trace` (None: the flow's, else the yard's; engine/spec/durability.py);
        UsageError when the run cannot work that way (a gate or a conversation turn with no checkpoints)."""
        digest = self.pin(bundle)[0]
        with self._lock:  # which step pauses the flow, judged once per definition
            if digest not in self._gates:
                self._gates[digest] = bundle.gate()
        return run_mode(bundle, durability, trace, gate=self._gates[digest], thread=thread)

    async def start(
        self,
        bundle: Bundle,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        branch: branches.TurnStart = branches.LATEST,
    ) -> Execution:
        """Record a new run of `bundle` (a turn of conversation `thread`) and prepare its execution;
        UsageError (nothing recorded) for bad inputs, a taken run id, a busy thread, an output
        folder outside the yard or a durability it cannot run in. `output_dir` (the run's choice)
        wins over the flow's `output_dir`; `durability` and `trace` over the flow's and the yard's.
        `branch`: where a turn of `thread` starts, when not after the thread's latest finished turn
        (engine/state/branches.py): the thread branches."""
        mode, keep = self.durability(bundle, durability, trace, thread=thread is not None)
        thread_id = threads.check_thread_id(thread) if thread is not None else None
        if thread_id is not None:
            inputs = await self.turn_inputs(bundle, thread_id, inputs)
        values, chosen_dir = self._checked(bundle, inputs, output_dir)
        compiled = self.compiled(bundle, durable=mode not in NO_CHECKPOINTS, inline=True)
        chosen = check_run_id(run_id) if run_id is not None else None
        if branch != branches.LATEST and thread_id is None:
            raise UsageError("a run goes on from an earlier turn only in a conversation thread")
        record, admitted = await self._record_new(
            bundle,
            values,
            chosen,
            thread_id,
            mode=mode,
            keep=keep,
            branch=branch,
        )
        if thread_id is None or admitted is None:
            if mode not in NO_CHECKPOINTS and plan_for(compiled, mode, thread_id) is None:
                # its checkpoint thread is the run id: nothing to read
                self.db.saver.expect_new(record.id)
            return await self.execution(
                bundle,
                compiled,
                record,
                compiled.initial_state(values),
                output_dir=chosen_dir,
                trace=keep,
            )
        return await self._turn(bundle, compiled, record, values, admitted, chosen_dir)

    async def turn_inputs(
        self, bundle: Bundle, thread_id: str, inputs: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """A turn's inputs before they are checked: `inputs` (the run's) over the values a client wrote
        to the thread (engine/state/thread_inputs.py)."""
        written = await self.db.aread(lambda conn: thread_inputs.read(conn, thread_id))
        return thread_inputs.under(written.values, inputs, bundle.flow.inputs)

    def _checked(
        self, bundle: Bundle, inputs: Mapping[str, Any] | None, output_dir: str | None
    ) -> tuple[dict[str, Any], str | None]:
        """A new run's inputs (coerced to the flow's types) and output folder (the run's choice, else
        the flow's), each refused before the run exists: a usage error, not a failed run (nor does a
        memory scope that does not render make one)."""
        values = coerce_inputs(
            bundle.flow.inputs, dict(inputs or {}), where=f"flow '{bundle.name}'"
        )
        chosen_dir = (
            output_dir
            if output_dir is not None
            else bundle.flow.output_dir
            if self.output_dirs
            else None
        )
        if chosen_dir is not None:
            what = "--output" if output_dir is not None else "output_dir"
            chosen_dir = self.check_output_dir(bundle, chosen_dir, what)
        render_scope(bundle, values)
        return values, chosen_dir

    async def _record_new(
        self,
        bundle: Bundle,
        values: dict[str, Any],
        chosen: str | None,
        thread_id: str | None,
        *,
        mode: str,
        keep: bool,
        branch: branches.TurnStart = branches.LATEST,
    ) -> tuple[RunRecord, threads.Admitted | None]:
        """The row of a new running run (`chosen`, its id, else a generated one, tried again should one
        be taken), stored with its pinned definition; a turn of `thread_id` admitted only while no other
        turn of it runs."""
        digest, text = self.pin(bundle)
        admitted: threads.Admitted | None = None
        me = liveness.current()
        for _attempt in range(5):
            now = now_iso()
            record = RunRecord(
                id=chosen or new_run_id(),
                flow=bundle.name,
                version=bundle.version,
                digest=digest,
                status=RunStatus.RUNNING,
                inputs=values,
                thread_id=thread_id,
                owner_pid=me.pid,
                owner_host=me.host,
                owner_start=me.start,
                created=now,
                started=now,
                owner_replica=me.replica,
                lease_until=me.lease_until,
                durability=mode,
                trace=keep,
                budget=run_budget(bundle),
                regenerates=branch.regenerates,
            )
            writes = [store.insert_run(record)]
            if digest not in self._saved:
                writes.insert(
                    0, store.save_definition(digest, bundle.name, bundle.version, text, now)
                )
            try:
                # the run's row is kept as its steps will be; a lone run commits it itself, on this
                # thread (engine/state/writer.py, `write`)
                with commit_level(self.synchronous(bundle)), self.db.writer.running():
                    if thread_id is None:
                        await self.db.writer.write(*writes)
                    else:  # one turn at a time: admitted only while no other run of the thread goes on
                        said = threads.turn_text(values)
                        admit = threads.admit(
                            thread_id,
                            bundle.name,
                            threads.title_of(said),
                            writes,
                            record.id,
                            now,
                            name=naming.fallback_name(said),
                            after=branch.after,
                        )
                        admitted = await threads.wait_turn(
                            functools.partial(self.db.writer.call, admit), thread_id
                        )
                self._saved.add(digest)
                break
            except INTEGRITY_ERRORS:
                if chosen is not None:
                    raise UsageError(
                        f"run id '{chosen}' is already taken (see `blockyard runs show {chosen}`)"
                    ) from None
            except DB_ERRORS as exc:
                raise StateError(f"cannot record a new run in {self.location}: {exc}") from None
        else:  # pragma: no cover - five generated ids taken in a row
            raise StateError("could not allocate a unique run id")
        return record, admitted

    async def _turn(
        self,
        bundle: Bundle,
        compiled: CompiledFlow,
        record: RunRecord,
        values: dict[str, Any],
        admitted: threads.Admitted,
        chosen_dir: str | None,
    ) -> Execution:
        """The execution of an admitted turn of a conversation: from the thread's checkpoint, with the
        conversation its flow's history window sends."""
        thread_id = record.thread_id
        assert thread_id is not None
        # nothing finished yet: whatever a failed turn left is not the talk
        fresh = admitted.checkpoint is None
        branch = None if admitted.branch is None else turns.branch_messages(admitted.branch)
        start_at = (
            None
            if fresh or branch is not None or admitted.checkpoint == threads.LATEST
            else admitted.checkpoint
        )
        if branch is not None:  # it goes on from an earlier turn: its branch's talk, not the head's
            stored = branch
        elif fresh:
            stored = []
        else:
            stored = await turns.stored_conversation(self.db.saver, thread_id, admitted.checkpoint)
        talk = turns.conversation(
            stored, record.id, history_window(bundle), bundle.config.threads.history_chars
        )
        start = turns.turn_state(
            values,
            record.id,
            talk.drop,
            fresh=fresh and not admitted.first,
            context=empty(compiled.accumulated),
            branch=branch,
        )
        return await self.execution(
            bundle,
            compiled,
            record,
            start,
            conversation=talk.said,
            checkpoint=start_at,
            first=admitted.first,
            turns_before=admitted.turns_before,
            output_dir=chosen_dir,
        )

    async def enqueue(
        self,
        bundle: Bundle,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        start: bool = False,
    ) -> RunRecord:
        """Record a new run of `bundle` as `queued`, held by this process (and its lease, on a server
        replica) until it starts (`start_queued`) — or, if this process dies first, until another
        server adopts it (docs/postgres.md, "The queue"). Checked like `start`: UsageError (nothing
        recorded) for bad inputs, a taken run id, an output folder outside the yard or a durability
        it cannot run in. Its durability mode and trace choice are recorded with it, so that whichever
        server starts it runs it the same way.

        With `start` (a server with a free slot and no global limit to ask), the run is recorded
        already started: `running` under this process, the row `store.start_queued` would make of
        it, in the one transaction that records it; the caller then executes it (`astream_queued`)."""
        mode, keep = self.durability(bundle, durability, trace)
        values, chosen_dir = self._checked(bundle, inputs, output_dir)
        digest, text = self.pin(bundle)
        me = liveness.current()
        now = now_iso()
        record = RunRecord(
            id=check_run_id(run_id),
            flow=bundle.name,
            version=bundle.version,
            digest=digest,
            status=RunStatus.RUNNING if start else RunStatus.QUEUED,
            inputs=values,
            owner_pid=me.pid,
            owner_host=me.host,
            owner_start=me.start,
            created=now,
            started=now if start else None,
            owner_replica=me.replica,
            lease_until=me.lease_until,
            durability=mode,
            output_dir=chosen_dir,
            trace=keep,
            budget=run_budget(bundle),
            traceparent=self.traceparents.get(run_id),
        )
        writes = [store.insert_run(record)]
        if digest not in self._saved:
            writes.insert(0, store.save_definition(digest, bundle.name, bundle.version, text, now))
        try:
            with commit_level(
                self.synchronous(bundle)
            ):  # a queued run is kept as its steps will be
                await self.db.writer.write(*writes)
        except INTEGRITY_ERRORS:
            raise UsageError(
                f"run id '{run_id}' is already taken (see `blockyard runs show {run_id}`)"
            ) from None
        except DB_ERRORS as exc:
            raise StateError(f"cannot record a new run in {self.location}: {exc}") from None
        self._saved.add(digest)
        return record

    async def start_queued(self, record: RunRecord, bundle: Bundle | None = None) -> Execution:
        """The first execution of a queued run this process has just started (`store.start_queued`
        made it `running` under this process, or `enqueue(start=True)` recorded it so), on its pinned
        definition (`bundle`, when the caller still has it, else read back by digest)."""
        if bundle is None or self.pin(bundle)[0] != record.digest:
            bundle = await self.stored_bundle(record.digest)
        if bundle is None:
            raise StateError(
                f"run {record.id}: its definition {record.digest} is missing from the state database"
            )
        # in the mode and with the trace it was accepted with (recorded by `enqueue`)
        durable = record.mode not in NO_CHECKPOINTS
        compiled = self.compiled(bundle, durable=durable, inline=True)
        if durable and plan_for(compiled, record.mode, None) is None:
            self.db.saver.expect_new(record.id)  # it never ran: no checkpoint to read
        if record.traceparent is not None:
            # queued by an HTTP caller, maybe on another server: its trace goes on
            self.traceparents.setdefault(record.id, record.traceparent)
        return await self.execution(
            bundle,
            compiled,
            record,
            compiled.initial_state(record.inputs),
            output_dir=record.output_dir,
            trace=record.trace,
        )

    async def astream_queued(
        self, record: RunRecord, bundle: Bundle | None = None
    ) -> AsyncGenerator[Event, None]:
        """`start_queued` and yield its events, the last one terminal."""
        execution = await self.start_queued(record, bundle)
        async with aclosing(execute(execution)) as events:
            async for event in events:
                yield event

    async def resume(
        self, run_id: str, wanted: Ask | None = None, *, budget: Mapping[str, Any] | None = None
    ) -> Execution:
        """The next execution of run `run_id` on its pinned definition: with the decision `wanted` on
        a gate it waits at, or (None) going on after a crash or failure. UsageError or DecisionRefused
        (nothing changed) when it cannot go on (engine/runtime/resumes.py)."""
        db = self.db
        record = await resumes.stopped_run(db, run_id, wanted)
        if budget:
            # raised limits (`resume --budget`), kept with the run for its later executions too
            try:
                limits = raised(record.budget, dict(budget)).model_dump(exclude_none=True)
            except ValueError as exc:
                raise UsageError(f"run {run_id}: {exc}") from None
            await db.writer.write(store.set_budget(run_id, limits))
            record = dataclasses.replace(record, budget=limits)
        if record.status == RunStatus.QUEUED:
            # its server stopped or died before starting it: it starts
            # here, as it was accepted (its mode and trace choice), from its inputs
            await resumes.take_queued(db, record)
            return await self.start_queued(record)
        bundle = await self.stored_bundle(record.digest)
        if bundle is None:
            raise StateError(
                f"run {run_id}: its definition {record.digest} is missing from the state database"
            )
        compiled = self.compiled(bundle, inline=True)
        state = await compiled.graph.aget_state(
            {"configurable": {"thread_id": record.thread_id or run_id}}
        )
        if state.created_at is None:
            resumes.check_checkpointed(record)
        pending = {item.id: item.value for item in state.interrupts}
        go_on = await resumes.how_to_go_on(db, record, pending, wanted)
        start: Any = Command(resume=go_on.resume) if go_on.resume else None
        values = dict(state.values) if state.values else None
        if wanted is None and not pending and state.created_at is None:
            # died before its first checkpoint: start over from its inputs (a turn, with its branch's
            # conversation: the one its models are sent)
            if record.thread_id:
                earlier = await self._branch_of(record)
                start = turns.turn_state(
                    record.inputs,
                    record.id,
                    context=empty(compiled.accumulated),
                    branch=earlier,
                )
                values = {"messages": earlier}
            else:
                start = compiled.initial_state(record.inputs)
        last = await db.aread(lambda conn: store.last_seq(conn, run_id))
        return await self.execution(
            bundle,
            compiled,
            record,
            start,
            last_seq=last,
            resumed=True,
            values=values,
            preface=go_on.preface,
            pending=go_on.wait_again,
        )

    async def _branch_of(self, record: RunRecord) -> list[Any]:
        """The messages of the branch a turn went on from (engine/state/branches.py), as a checkpoint holds
        them: for a turn whose thread has no checkpoint at all (its first turn, or the first of a copied
        thread, engine/state/thread_copy.py), the only place they are."""
        thread_id, after = record.thread_id, record.after_turn
        assert thread_id is not None
        if after is None:
            return []
        rows = await self.db.aread(lambda conn: messages.of_branch(conn, thread_id, after))
        return turns.branch_messages(rows)

    async def execution(
        self,
        bundle: Bundle,
        compiled: CompiledFlow,
        record: RunRecord,
        start: Any,
        *,
        last_seq: int = 0,
        resumed: bool = False,
        values: dict[str, Any] | None = None,
        preface: list[Event] | None = None,
        pending: dict[str, Any] | None = None,
        conversation: tuple[tuple[str, str], ...] | None = None,
        checkpoint: str | None = None,
        first: bool = False,
        turns_before: int | None = None,
        output_dir: str | None = None,
        trace: bool = True,
    ) -> Execution:
        """One execution of `record`: its run context (models, tools, memory, a thread's conversation)
        and end hook. A resumed turn finds its conversation in `values`, the checkpoint it goes on from;
        a resumed run writes its files where it started writing them (recorded in its first
        run_started event)."""
        if resumed:
            # where its first execution wrote; a queued run that never started: its own choice
            output_dir = (
                await self.db.aread(lambda conn: written.output_dir_of(conn, record.id))
                or record.output_dir
            )
        context, note = self.context(bundle, record.id, record.thread_id, output_dir)
        context.spend = await self.spend(record, resumed)
        if record.thread_id is not None:
            budget = bundle.config.threads.history_chars
            if conversation is None:
                stored = (values or {}).get("messages") or []
                conversation = turns.conversation(
                    stored, record.id, history_window(bundle), budget
                ).said
            context.conversation = conversation
            context.history_chars = budget
            thread_id = record.thread_id
            context.turns_before = (
                turns_before
                if turns_before is not None
                else await self.db.aread(lambda conn: threads.finished_turns(conn, thread_id))
            )
        scope = render_scope(bundle, record.inputs)
        memory = (
            await self.memory.open(scope, bundle.name, record.id) if scope is not None else None
        )
        context.memory = memory
        data: dict[str, Any] = {"resumed": True} if resumed else {}
        if output_dir is not None:
            data["output_dir"] = output_dir
        if note:
            data["note"] = note
        if record.thread_id:
            data["thread"] = record.thread_id
        if record.mode != "sync":
            data["durability"] = record.mode
        return Execution(
            self.db,
            compiled,
            record,
            context,
            start,
            last_seq=last_seq,
            started_data=data,
            values=values,
            preface=list(preface or []),
            pending=pending,
            on_end=end_hook(self.db, compiled.graph, record, memory),
            checkpoint=checkpoint,
            naming=naming.first_turn(bundle, record, context.models) if first else None,
            trace=trace,
            observers=tuple(self.observers),
            traceparent=self.traceparents.pop(record.id, None),
            synchronous=self.synchronous(bundle),
        )

    def synchronous(self, bundle: Bundle) -> str | None:
        """The disk guarantee of the commits of a run of `bundle`: its flow's, else its yard's
        blockyard.yaml's (unless the program chose the database's), else None: the database's."""
        return synchronous_of(bundle.flow, None if self._synchronous_chosen else bundle.config)

    async def spend(self, record: RunRecord, resumed: bool) -> RunSpend:
        """What the run spent before this execution (by its trace when it has one: a crashed execution's
        calls are there, not in its row), its budget, and in a thread's turn what the other turns spent."""
        budget = BudgetSpec.model_validate(record.budget) if record.budget else None
        spend = RunSpend(run_id=record.id, budget=budget, duration_before=record.duration)
        if resumed:
            spend.spent = (
                await self.db.aread(lambda conn: store.traced_spend(conn, record.id))
                if record.trace
                else Spend.of(record.as_dict())
            )
        if budget is not None and record.thread_id is not None:
            thread_id = record.thread_id
            spend.thread, spend.thread_duration_before = await self.db.aread(
                lambda conn: store.thread_spend(conn, thread_id, record.id)
            )
        return spend

    async def astream(
        self,
        bundle: Bundle,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        branch: branches.TurnStart = branches.LATEST,
    ) -> AsyncGenerator[Event, None]:
        """Start a run of the pinned `bundle` (see `start`) and yield its events, the last one terminal."""
        execution = await self.start(
            bundle,
            inputs,
            run_id=run_id,
            thread=thread,
            output_dir=output_dir,
            durability=durability,
            trace=trace,
            branch=branch,
        )
        async with aclosing(execute(execution)) as events:
            async for event in events:
                yield event

    async def astream_resume(
        self, run_id: str, wanted: Ask | None = None, *, budget: Mapping[str, Any] | None = None
    ) -> AsyncGenerator[Event, None]:
        """Go on with run `run_id` (see `resume`) and yield its events."""
        execution = await self.resume(run_id, wanted, budget=budget)
        async with aclosing(execute(execution)) as events:
            async for event in events:
                yield event

    async def arun(
        self,
        bundle: Bundle,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        branch: branches.TurnStart = branches.LATEST,
    ) -> RunResult:
        """Run the pinned `bundle` to its end (finished, failed or waiting for approval); see `start`."""
        return await collect(
            await self.start(
                bundle,
                inputs,
                run_id=run_id,
                thread=thread,
                output_dir=output_dir,
                durability=durability,
                trace=trace,
                branch=branch,
            )
        )

    async def aresume(
        self, run_id: str, wanted: Ask | None = None, *, budget: Mapping[str, Any] | None = None
    ) -> RunResult:
        """`astream_resume` to the end of the execution."""
        return await collect(await self.resume(run_id, wanted, budget=budget))

    async def expire(self, now: datetime | None = None) -> list[Expired]:
        """Decide every gate whose timeout has passed at `now` (default: now) by its `on_timeout`,
        and go on with its run; a gate someone decides first (or whose run is busy) is left alone."""
        moment = gates.iso(now or datetime.now().astimezone())
        due = await self.db.aread(lambda conn: gates.due(conn, moment))
        expired: list[Expired] = []
        for gate in due:
            wanted = approvals.on_timeout(gate)
            try:
                execution = await self.resume(gate.run_id, wanted)
            except DecisionRefused:
                continue  # decided meanwhile, or the run is busy with another gate: the next round sees it
            result = await collect(execution)
            action = (
                wanted.decision
                if wanted.decision != "timeout"
                else str(gate.request.get("on_timeout"))
            )
            expired.append(Expired(gate.run_id, gate.gate, action, result.status, result.error))
        return expired
