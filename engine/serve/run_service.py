"""The runtime as the server uses it: start runs on a chosen pinned bundle, resume them, read
runs and their traces, and recover runs a crashed server left behind.

The server never runs what the files say at the moment a run starts: it runs the bundle the
catalog chose (the newest good version) through the engine (engine/runtime/engine.py), which
stores that bundle by digest, so a resume always continues on it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterable, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import Any

from engine import telemetry
from engine.compile.draw import as_json, mermaid
from engine.compile.flowgraph import flow_graph
from engine.compile.reactflow import reactflow
from engine.core.events import EventDict, RunStatus, now_iso
from engine.core.redaction import mask_url
from engine.core.usage import Spend
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.definitions.project import load_project
from engine.runtime import approvals
from engine.runtime.engine import Engine
from engine.spec.typecheck import coerce_inputs
from engine.state import liveness, messages, stats, store, thread_inputs, threads
from engine.state.branches import LATEST, TurnStart
from engine.state.database import Connection
from engine.state.ids import check_run_id, new_run_id
from engine.state.store import RunRecord, effective_status
from engine.telemetry import traceparent

MAX_TRACEPARENTS = 10_000  # callers' traces kept for runs not yet executing (a run another replica adopts never is)


class RunService:
    """One per server process: owns the engine (and so the state database connections)."""

    def __init__(self, root: Path) -> None:
        project = load_project(root)
        self.engine = Engine.for_project(project)
        # OpenTelemetry traces of the runs it executes, as blockyard.yaml (read at the start) or OTEL_* say
        self.telemetry = telemetry.start(project.config.telemetry)
        if self.telemetry is not None:
            self.engine.observers.append(self.telemetry.observer)
        self._graphs: dict[str, JsonDict] = {}
        self._reactflows: dict[str, JsonDict] = {}

    @property
    def state_path(self) -> Path:
        return self.engine.state_path

    def close(self) -> None:
        self.engine.close()
        if self.telemetry is not None:  # the spans of the last runs, sent before the server exits
            self.telemetry.flush()

    def continue_trace(self, run_id: str, header: str | None) -> None:
        """Run `run_id`'s next execution here continues the trace of the caller whose W3C `traceparent`
        header is `header` (an invalid one is ignored, as the specification says)."""
        parent = traceparent.valid(header)
        if parent is None:
            return
        if len(self.engine.traceparents) >= MAX_TRACEPARENTS:
            # runs accepted here but executed elsewhere
            self.engine.traceparents.clear()
        self.engine.traceparents[run_id] = parent

    # ---- starting and resuming --------------------------------------------------------------

    @staticmethod
    def new_run_id() -> str:
        return new_run_id()

    @staticmethod
    def check_inputs(bundle: Bundle, inputs: Mapping[str, Any]) -> JsonDict:
        """The inputs coerced to their declared types; UsageError names the bad key."""
        return coerce_inputs(bundle.flow.inputs, dict(inputs), where=f"flow '{bundle.name}'")

    @staticmethod
    def check_run_id(run_id: str) -> str:
        return check_run_id(run_id)

    def check_output_dir(
        self, output_dir: str, bundle: Bundle, prompts: Iterable[str] = ()
    ) -> None:
        """UsageError unless `output_dir` names a folder of the yard that overlaps nothing the engine
        reads, `prompts` (the prompt files the served yard uses now) included (engine/definitions/outputdir.py)."""
        self.engine.check_output_dir(bundle, output_dir, "output_dir", prompts)

    async def start(
        self,
        bundle: Bundle,
        inputs: Mapping[str, Any],
        run_id: str,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        branch: TurnStart = LATEST,
    ) -> AsyncGenerator[EventDict, None]:
        """Run `bundle` (a turn of conversation `thread`, starting where `branch` says) and yield its
        events as dicts; the last one ends the execution."""
        async with aclosing(
            self.engine.astream(
                bundle,
                inputs,
                run_id=run_id,
                thread=thread,
                output_dir=output_dir,
                durability=durability,
                trace=trace,
                branch=branch,
            )
        ) as events:
            async for event in events:
                yield event.as_dict()

    async def enqueue(
        self,
        bundle: Bundle,
        inputs: Mapping[str, Any],
        run_id: str,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        *,
        start: bool = False,
    ) -> RunRecord:
        """Record a new run as `queued` — with `start`, as started by this process — before the server
        answers (engine/runtime/engine.py, `enqueue`)."""
        return await self.engine.enqueue(
            bundle,
            inputs,
            run_id=run_id,
            output_dir=output_dir,
            durability=durability,
            trace=trace,
            start=start,
        )

    async def admit(self, run_id: str, limit: int | None) -> store.Admission:
        """Try to start queued run `run_id`, held by this process, within the global `limit` (store.start_queued)."""
        return await self.engine.db.writer.call(
            store.start_queued(run_id, liveness.current(), limit=limit)
        )

    async def adopt(self, record: RunRecord) -> bool:
        """Hold a queued run whose server died (store.adopt_queued); False when another server was quicker."""
        return bool(
            await self.engine.db.writer.call(store.adopt_queued(record, liveness.current()))
        )

    async def release_unstarted(self, run_id: str) -> None:
        """Let go of a run recorded started that this server will not execute (store.release_unstarted)."""
        await self.engine.db.writer.write(store.release_unstarted(run_id, liveness.current()))

    async def record_cancelled(self, run_id: str, error: str) -> None:
        """A run this server held, cancelled before its execution began: `interrupted`, never adopted
        and run by another server (store.cancel_unstarted); a run that began records its own end."""
        await self.engine.db.writer.write(
            store.cancel_unstarted(run_id, liveness.current(), error, now_iso())
        )

    async def record_unadmitted(
        self,
        run_id: str,
        bundle: Bundle,
        inputs: Mapping[str, Any],
        thread_id: str,
        created: str,
        error: str,
    ) -> None:
        """A turn of `thread_id` cancelled before its execution began. One that waited for the thread's turn
        before it (`enqueue`, or superseded by a newer turn) has no row — the runtime records a turn once
        the thread admits it — and is recorded `interrupted` with `error`, never started and held by no
        server, so that it stays listed: a run of the thread, not a turn
        (engine/serve/langgraph_api/state.py). One admitted as it was cancelled has its row, recorded
        `interrupted` as `record_cancelled` does. Both in one transaction: a newer turn's rollback,
        which deletes the row once it reads `interrupted`, never sees it come back."""
        digest, text = self.engine.pin(bundle)
        now = now_iso()
        record = RunRecord(
            id=run_id,
            flow=bundle.name,
            version=bundle.version,
            digest=digest,
            status=RunStatus.INTERRUPTED,
            inputs=dict(inputs),
            thread_id=thread_id,
            created=created,
            finished=now,
            error=error,
        )
        writes = [
            store.save_definition(digest, bundle.name, bundle.version, text, now),
            store.insert_run(record),
        ]
        held = store.cancel_unstarted(run_id, liveness.current(), error, now)

        def apply(conn: Connection) -> None:
            for write in writes if store.get_run(conn, run_id) is None else [held]:
                conn.execute(write.sql, write.params)

        await self.engine.db.writer.call(apply)

    async def record_unended(self, run_id: str, error: str) -> None:
        """A run this server held whose execution an error ended before it recorded its end: `failed`
        with `error` (store.fail_unended); a run that recorded its end is left as it is."""
        # a server may echo a key; a URL its password
        message = mask_url(self.engine.secrets.text(error))
        await self.engine.db.writer.write(
            store.fail_unended(run_id, liveness.current(), message, now_iso())
        )

    async def release(self, run_ids: list[str]) -> None:
        """Let go of queued runs this server will not start (store.release_queued)."""
        if run_ids:
            await self.engine.db.writer.write(store.release_queued(run_ids))

    async def running_count(self) -> int:
        """Runs running under a live lease on every server sharing the database."""
        now = time.time()
        return await self.engine.db.aread(lambda conn: store.running_count(conn, now))

    async def start_queued(
        self, record: RunRecord, bundle: Bundle | None = None
    ) -> AsyncGenerator[EventDict, None]:
        """Execute a queued run this server has just started (`admit`) and yield its events as dicts."""
        async with aclosing(self.engine.astream_queued(record, bundle)) as events:
            async for event in events:
                yield event.as_dict()

    async def resume(
        self, run_id: str, decision: Mapping[str, Any]
    ) -> AsyncGenerator[EventDict, None]:
        """Continue a run on its pinned bundle; `decision` decides a waiting gate."""
        wanted = approvals.ask(
            decision.get("approve"),
            decision.get("values"),
            decision.get("reason"),
            decision.get("gate"),
            decision.get("actor"),
        )
        async with aclosing(
            self.engine.astream_resume(run_id, wanted, budget=decision.get("budget"))
        ) as events:
            async for event in events:
                yield event.as_dict()

    # ---- reading ----------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> JsonDict | None:
        record = await self.engine.db.aread(lambda conn: store.get_run(conn, run_id))
        return _run_dict(record) if record is not None else None

    async def list_runs(
        self, *, flow: str | None, status: str | None, limit: int
    ) -> list[JsonDict]:
        # `running` rows whose owner died show as interrupted, so filter after mapping them
        wanted = (
            [status]
            if status and status not in (RunStatus.RUNNING, RunStatus.INTERRUPTED)
            else None
        )
        records = await self.engine.db.aread(
            lambda conn: store.list_runs(
                conn, flow=flow, statuses=wanted, limit=None if status else limit
            )
        )
        runs = [_run_dict(record) for record in records]
        return [run for run in runs if status is None or run["status"] == status][:limit]

    async def events(self, run_id: str, after: int) -> list[EventDict]:
        events = await self.engine.db.aread(lambda conn: store.load_events(conn, run_id, after))
        return [event.as_dict() for event in events]

    async def status(self, run_id: str) -> str | None:
        run = await self.get_run(run_id)
        return run["status"] if run is not None else None

    async def stats(self, window: stats.Window, flow: str | None) -> stats.Report:
        """Runs, failures, durations and spend per flow version over `window` (GET /stats, `blockyard stats`)."""
        return await self.engine.db.aread(lambda conn: stats.report(conn, window, flow))

    async def waiting_by_flow(self) -> dict[str, int]:
        """How many runs wait at an approval gate, per flow, in the whole database (the metrics' gauge)."""
        return await self.engine.db.aread(stats.waiting_by_flow)

    async def pinned_bundle(self, digest: str) -> Bundle | None:
        text = await self.engine.db.aread(lambda conn: store.load_definition(conn, digest))
        return Bundle.from_json(text) if text is not None else None

    def graph(self, bundle: Bundle) -> JsonDict:
        """The flow's graph as JSON (engine/compile/draw.py, `as_json`) with its `mermaid` text, cached by digest."""
        cached = self._graphs.get(bundle.digest)
        if cached is None:
            graph = flow_graph(bundle)
            cached = self._graphs[bundle.digest] = {**as_json(graph), "mermaid": mermaid(graph)}
        return cached

    def reactflow(self, bundle: Bundle) -> JsonDict:
        """The flow as a React Flow graph (engine/compile/reactflow.py), which the web page draws; cached by digest."""
        cached = self._reactflows.get(bundle.digest)
        if cached is None:
            cached = self._reactflows[bundle.digest] = reactflow(bundle)
        return cached

    # ---- conversation threads (engine/state/threads.py, engine/state/messages.py) --------------

    @staticmethod
    def check_thread_id(thread_id: str) -> str:
        return threads.check_thread_id(thread_id)

    async def list_threads(self, *, flow: str | None, limit: int) -> list[JsonDict]:
        """Threads, most recently active first, each with the status of its latest turn."""

        def read(conn: Connection) -> list[JsonDict]:
            found = threads.list_threads(conn, flow=flow, limit=limit)
            spent = stats.thread_spend(conn, [thread.id for thread in found])
            return [_thread_dict(conn, thread, spent.get(thread.id)) for thread in found]

        return await self.engine.db.aread(read)

    async def get_thread(self, thread_id: str) -> JsonDict | None:
        def read(conn: Connection) -> JsonDict | None:
            thread = threads.get_thread(conn, thread_id)
            if thread is None:
                return None
            found = _thread_dict(conn, thread, stats.thread_spend(conn, [thread.id]).get(thread.id))
            # what a client wrote to its inputs, and the record of each write (engine/state/thread_inputs.py)
            found["inputs"] = thread_inputs.read(conn, thread_id).as_dict()
            return found

        return await self.engine.db.aread(read)

    async def thread_ids(self) -> list[str]:
        """The ids of the most recently active threads (for did-you-mean hints)."""
        return await self.engine.db.aread(threads.thread_ids)

    async def create_thread(self, thread_id: str, flow: str | None) -> JsonDict | None:
        """A new thread with no turns yet; None when the id is taken."""
        made = await self.engine.db.writer.call(threads.create(thread_id, flow, now_iso()))
        return await self.get_thread(made.id) if made is not None else None

    async def delete_thread(self, thread_id: str) -> bool | threads.Busy:
        """Delete a thread with its messages and checkpoints (threads.delete)."""
        return await self.engine.db.writer.call(
            threads.delete(thread_id, self.engine.db.saver.delete_thread_writes(thread_id))
        )

    async def history(
        self, thread_id: str, *, after: int | None, before: int | None, newest: bool, limit: int
    ) -> tuple[list[messages.Message], int]:
        """A page of a thread's messages, oldest first, and how many it holds in all."""

        def read(conn: Connection) -> tuple[list[messages.Message], int]:
            if before is not None or newest:
                page = messages.history(conn, thread_id, after=before, limit=limit, newest=True)
            else:
                page = messages.history(conn, thread_id, after=after, limit=limit)
            return page, messages.count(conn, thread_id)

        return await self.engine.db.aread(read)

    async def turn_messages(self, run_id: str) -> list[messages.Message]:
        """The two messages a finished turn added (its message and its reply); none otherwise."""
        return await self.engine.db.aread(lambda conn: messages.of_run(conn, run_id))

    # ---- recovery ---------------------------------------------------------------------------

    async def recover(self, *, leave_leased: bool = False) -> list[str]:
        """Mark runs left `running` by a dead process as `interrupted` (resumable); their ids. A
        replica (`leave_leased`) leaves the runs of dead replicas alone: it takes them over."""
        records = await self.engine.db.aread(
            lambda conn: store.list_runs(conn, statuses=[RunStatus.RUNNING], limit=None)
        )
        orphans = [
            r
            for r in records
            if effective_status(r) == RunStatus.INTERRUPTED
            and not (leave_leased and r.owner_replica is not None)
        ]
        for record in orphans:
            await self.engine.db.writer.write(
                store.end_run(
                    record.id,
                    RunStatus.INTERRUPTED,
                    outputs=None,
                    error="the process running it stopped before it finished",
                    error_step=record.error_step,
                    finished=now_iso(),
                    elapsed=0.0,
                )
            )
        return [record.id for record in orphans]


def _run_dict(record: RunRecord) -> JsonDict:
    data = record.as_dict()
    data["status"] = effective_status(record)
    data["durability"] = record.mode
    for private in (
        "owner_pid",
        "owner_host",
        "owner_start",
        "owner_replica",
        "lease_until",
        "output_dir",
        "trace",
        "traceparent",
    ):
        data.pop(private, None)
    # its model calls' totals with their cost as people read it
    data["usage"] = stats.usage_dict(data)
    return data


def _thread_dict(conn: Connection, thread: threads.Thread, spend: Spend | None = None) -> JsonDict:
    last = store.get_run(conn, thread.last_run) if thread.last_run else None
    data = thread.as_dict()
    data["last_status"] = effective_status(last) if last is not None else None
    # the totals of all its turns (docs/observability.md)
    data["usage"] = stats.usage_dict(spend or Spend())
    return data
