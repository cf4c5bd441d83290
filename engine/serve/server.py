"""The server's moving parts and their lifetime: catalog and reload, runs, schedules, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sse_starlette.sse import AppStatus

from engine.core.diagnostics import did_you_mean
from engine.core.events import EventDict, RunStatus
from engine.definitions.pinned import Bundle
from engine.runtime import cancelling
from engine.serve import cancels, chores
from engine.serve.broker import Broker
from engine.serve.catalog import Catalog, FlowEntry
from engine.serve.clock import Clock, SystemClock
from engine.serve.jobs import Job, JobQueue, ShuttingDown
from engine.serve.logs import fields, get_logger
from engine.serve.metrics import Metrics
from engine.serve.problems import ApiError, conflict, not_found
from engine.serve.reload import Reloader
from engine.serve.run_service import RunService
from engine.serve.schedules import Scheduler, ScheduleStore
from engine.serve.webhooks import Webhooks
from engine.spec.config import NotifySpec
from engine.spec.durability import NO_CHECKPOINTS
from engine.state import backends, crons, liveness, store
from engine.state.branches import LATEST, TurnStart
from engine.state.database import DB_ERRORS, StateError
from engine.state.store import effective_status
from engine.state.writer import WriterClosed

# what recording a run's end after its job can meet (`_settle_cancelled`, `_record_unended`): a lost database
_SETTLE_ERRORS: tuple[type[Exception], ...] = (*DB_ERRORS, StateError, WriterClosed)


@dataclass
class Settings:
    """How one server runs; the CLI fills it from flags, tests from their fixtures."""

    root: Path
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    watch: bool = True
    schedules: bool = True
    grace: float = 30.0  # seconds running runs get to finish at shutdown
    sse_ping: float = 15.0
    poll: float = 0.5  # how often followers look for events written by other processes
    replica: bool = (
        False  # hold leases on its runs and take over those of dead replicas (`blockyard serve`)
    )
    clock: Clock = field(default_factory=SystemClock)


class Server:
    """Everything a request handler needs, created once per app."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.root.resolve()
        self.reloader = Reloader(self.root)
        self.broker = Broker()
        # GET /metrics (engine/serve/metrics.py); its registry is this server's own
        self.metrics = Metrics()
        # engine/serve/webhooks.py
        self.webhooks = Webhooks(lambda: self.catalog.server.webhooks, self._notify_of)
        self.service: RunService | None = None
        self.queue: JobQueue | None = None
        self.scheduler: Scheduler | None = None
        self.global_limit: int | None = None  # server.max_concurrent_runs_global, read at start
        self.log = get_logger()
        self._tasks: list[asyncio.Task[None]] = []
        self._settling: set[asyncio.Task[Any]] = set()  # see `_settle_cancelled`, `_cancel_asked`
        self._stop = asyncio.Event()
        self.loaded = False

    @property
    def catalog(self) -> Catalog:
        return self.reloader.catalog

    def load(self) -> Catalog:
        """Read the yard once (blocking); the CLI does it before binding the port."""
        if not self.loaded:
            self.reloader.load_now()
            self.loaded = True
        return self.catalog

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        await self.startup()
        try:
            yield
        finally:
            await self.shutdown()

    async def startup(self) -> None:
        AppStatus.should_exit = False  # a previous server in this process may have set it
        self._stop = asyncio.Event()
        if not self.loaded:
            await asyncio.to_thread(self.load)
        self.service = RunService(self.root)
        # why an observer: engine/serve/metrics.py
        self.service.engine.observers.append(self.metrics.observe)
        replica = (
            liveness.join_as_replica(self.catalog.server.lease_seconds)
            if self.settings.replica
            else None
        )
        recovered = await self.service.recover(leave_leased=replica is not None)
        for run_id in recovered:
            self.log.warning("run_interrupted_by_crash", extra=fields(run=run_id))
        self.queue = JobQueue(
            self.broker, self.catalog.max_concurrent_runs, unended=self._record_unended
        )
        self.global_limit = self.catalog.server.max_concurrent_runs_global
        if self.settings.watch:
            self._tasks.append(
                asyncio.create_task(self.reloader.watch(self._stop), name="blockyard-reload")
            )
        if self.settings.schedules:
            self.scheduler = Scheduler(
                ScheduleStore(self.service.engine.location),
                self.settings.clock,
                lambda: self.catalog,
                self._fire,
                self._expire_approvals,
                self._fire_cron,
            )
            self.reloader.listeners.append(
                lambda _old, _new: self.scheduler.wake() if self.scheduler else None
            )
            self._tasks.append(
                asyncio.create_task(self.scheduler.run(), name="blockyard-schedules")
            )
            self._tasks.append(
                asyncio.create_task(
                    chores.daily_gc(
                        self.service.engine.location,
                        lambda: self.catalog.retention,
                        self.settings.clock,
                    ),
                    name="blockyard-gc",
                )
            )
        if replica is not None:
            self._tasks.append(asyncio.create_task(self._leases(replica), name="blockyard-leases"))
        else:  # queued runs a server that stopped or died left behind: this one starts them
            await self._take_over(None)
        if self.service.engine.location.postgres:
            # runs other replicas execute: their followers wake at once
            self._tasks.append(
                asyncio.create_task(
                    backends.listen_events(
                        self.service.engine.location,
                        self.broker.nudge,
                        self._stop,
                        self.queue.waker.wake,
                        self._cancel_asked,
                    ),
                    name="blockyard-listen",
                )
            )
        self.log.info(
            "started",
            extra=fields(
                root=str(self.root),
                flows=len(self.catalog.flows),
                max_concurrent_runs=self.queue.limit,
                max_concurrent_runs_global=self.global_limit,
                recovered=len(recovered),
                token=self.settings.token is not None,
                replica=replica.id if replica else None,
            ),
        )

    async def shutdown(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.reloader.listeners.clear()
        if self.queue is not None:
            held = [
                job.run_id
                for job in self.queue.jobs.values()
                if job.kind == "start" and job.thread is None and job.state == RunStatus.QUEUED
            ]
            await self.queue.drain(self.settings.grace)
            if self.service is not None:
                # still queued: another server (or the next start) starts them
                with contextlib.suppress(Exception):
                    await self.service.release(held)
            await asyncio.to_thread(self.queue.close)
        # the ends of the runs just drained are posted too
        await self.webhooks.close(self.settings.grace)
        if self.service is not None:
            await asyncio.to_thread(self.service.close)
        if self.settings.replica:
            liveness.leave()
        self.log.info("stopped")

    # ---- runs -------------------------------------------------------------------------------

    def flow(self, name: str) -> FlowEntry:
        entry = self.catalog.flow(name)
        if entry is None:
            problems = self.catalog.stale.get(name)
            hint = (
                " (its definition has errors, see /diagnostics)"
                if problems
                else did_you_mean(name, self.catalog.flows)
            )
            raise not_found("flow", f"unknown flow '{name}'{hint}")
        return entry

    def _ready(self) -> tuple[RunService, JobQueue]:
        if self.service is None or self.queue is None:
            raise ApiError(503, "starting", "the server is starting")
        if not self.queue.accepting:
            raise ApiError(503, "shutting_down", "the server is shutting down")
        return self.service, self.queue

    async def start_run(
        self,
        entry: FlowEntry,
        inputs: Mapping[str, Any],
        run_id: str | None = None,
        thread: str | None = None,
        output_dir: str | None = None,
        durability: str | None = None,
        trace: bool | None = None,
        traceparent: str | None = None,
        webhook: str | None = None,
        branch: TurnStart = LATEST,
    ) -> Job:
        """Accept a new run of `entry` (validated inputs, unique id, an output folder of the yard, a
        durability it can run in), queued behind the limit; with `thread`, a turn of that conversation
        (the runtime admits it once no other turn goes on), starting where `branch` says
        (engine/state/branches.py). `traceparent`: the caller's W3C trace, which the run's trace
        continues (engine/telemetry). `webhook`: the URL told when it waits or ends."""
        self._ready()  # a server starting or stopping answers 503 before judging the webhook
        if webhook is not None:
            self.webhooks.check(webhook, entry.bundle.config.http.allowed_hosts)
        job = await self._accept_run(
            entry,
            inputs,
            run_id,
            thread,
            output_dir,
            durability,
            trace,
            traceparent,
            branch,
        )
        self.webhooks.watch(job, webhook, thread)
        return job

    async def _accept_run(
        self,
        entry: FlowEntry,
        inputs: Mapping[str, Any],
        run_id: str | None,
        thread: str | None,
        output_dir: str | None,
        durability: str | None,
        trace: bool | None,
        traceparent: str | None,
        branch: TurnStart = LATEST,
    ) -> Job:
        service, queue = self._ready()
        if output_dir is not None:
            service.check_output_dir(
                output_dir, entry.bundle, (name for name, _hash in self.catalog.prompts)
            )
        service.engine.durability(entry.bundle, durability, trace, thread=thread is not None)
        if run_id is not None:
            service.check_run_id(run_id)
            if run_id in queue.jobs or await service.get_run(run_id) is not None:
                raise conflict("run_exists", f"run id '{run_id}' is already taken")
        check_size(inputs, self.catalog.server.max_input_bytes, "the run's inputs")
        # a turn takes the values written to its thread for inputs it does not give
        if thread is not None:
            inputs = await service.engine.turn_inputs(entry.bundle, thread, inputs)
        values = service.check_inputs(entry.bundle, inputs)
        job = Job(
            run_id or service.new_run_id(),
            entry.name,
            entry.version,
            "start",
            values,
            thread=thread,
        )
        service.continue_trace(job.run_id, traceparent)  # before the run can start
        if thread is not None:
            # a conversation's turn: admitted by the runtime once no other turn goes on
            try:
                return queue.submit(
                    job,
                    lambda: queue.runs.stream(
                        lambda: service.start(
                            entry.bundle,
                            values,
                            job.run_id,
                            thread,
                            output_dir,
                            durability,
                            trace,
                            branch,
                        )
                    ),
                )
            except ShuttingDown as exc:
                raise ApiError(503, "shutting_down", str(exc)) from None
        # recorded before the answer, so that if this server dies another one goes on with it
        # (docs/postgres.md, "The queue"). With a slot free here and no global limit to ask, it is
        # recorded started, in that one transaction (what an admission would make of it); otherwise
        # `queued`, and started once admitted
        if self.global_limit is None and await queue.reserve():
            try:
                record = await service.enqueue(
                    entry.bundle, values, job.run_id, output_dir, durability, trace, start=True
                )
            except BaseException:
                queue.unreserve()
                raise
            return await self._submit_started(job, record, entry.bundle)
        record = await service.enqueue(
            entry.bundle, values, job.run_id, output_dir, durability, trace
        )
        return self._submit_queued(job, record, entry.bundle)

    async def _submit_started(self, job: Job, record: store.RunRecord, bundle: Bundle) -> Job:
        """Execute a run recorded started (`enqueue(start=True)`) in the slot reserved for it."""
        service, queue = self._ready_parts()
        try:
            return queue.submit(
                job,
                lambda: queue.runs.stream(lambda: service.start_queued(record, bundle)),
                reserved=True,
            )
        except (
            ShuttingDown
        ) as exc:  # began to stop meanwhile: queued again, for another server to start
            queue.unreserve()
            # should the database be gone already, the run is left as a dead server's running run:
            # taken over by another replica, or marked interrupted by the next start
            with contextlib.suppress(Exception):
                await service.release_unstarted(record.id)
            raise ApiError(503, "shutting_down", str(exc)) from None

    def _submit_queued(self, job: Job, record: store.RunRecord, bundle: Bundle | None) -> Job:
        """Queue a run recorded `queued` under this server: it starts once it has a slot here and,
        with `server.max_concurrent_runs_global`, one of the global limit."""
        service, queue = self._ready_parts()
        try:
            return queue.submit(
                job,
                lambda: queue.runs.stream(lambda: service.start_queued(record, bundle)),
                admit=lambda: self._admit(record.id),
            )
        except ShuttingDown as exc:
            asyncio.get_running_loop().create_task(service.release([record.id]))
            raise ApiError(503, "shutting_down", str(exc)) from None

    async def _admit(self, run_id: str) -> bool:
        """Wait until queued run `run_id` may start, and start it (store.start_queued: one
        transaction that counts the running runs of every server and claims this one); False when
        it is no longer ours to start."""
        service, queue = self._ready_parts()
        limit = self.global_limit
        # woken when a run ends, here or (Postgres's NOTIFY) on another server; the timeout only
        # covers a lost notification, or other processes on a SQLite file, which cannot notify
        patience = (
            self.settings.poll
            if not service.engine.location.postgres
            else max(self.settings.poll, 5.0)
        )
        while True:
            outcome = await service.admit(run_id, limit)
            if outcome == store.Admission.STARTED:
                return True
            if outcome == store.Admission.GONE:
                return False
            await queue.waker.wait(patience)

    def _ready_parts(self) -> tuple[RunService, JobQueue]:
        if self.service is None or self.queue is None:
            raise ApiError(503, "starting", "the server is starting")
        return self.service, self.queue

    async def resume_run(
        self,
        run_id: str,
        decision: Mapping[str, Any],
        traceparent: str | None = None,
        webhook: str | None = None,
        thread: str | None = None,
    ) -> Job:
        """Accept a resume: a decision for a waiting run, or a restart of a failed/interrupted one
        (`traceparent`: the caller's W3C trace, which the execution's trace continues). `webhook`: the URL
        told when it waits or ends (default: the one the run was started with, while this server holds it)."""
        if webhook is not None:
            service, _ = self._ready()
            run = await service.get_run(run_id)
            bundle = await service.pinned_bundle(run["digest"]) if run is not None else None
            if bundle is not None:  # an unknown run: the resume answers 404
                # the rule of the run's own yard
                self.webhooks.check(webhook, bundle.config.http.allowed_hosts)
        job = await self._accept_resume(run_id, decision, traceparent)
        self.webhooks.watch(job, webhook, thread)
        return job

    async def _accept_resume(
        self, run_id: str, decision: Mapping[str, Any], traceparent: str | None
    ) -> Job:
        service, queue = self._ready()
        check_size(
            {k: decision.get(k) for k in ("values", "reason")},
            self.catalog.server.max_input_bytes,
            "the resume's values and reason",
        )
        if run_id in queue.jobs:
            raise conflict("run_busy", f"run {run_id} is {queue.jobs[run_id].state} in this server")
        run = await service.get_run(run_id)
        if run is None:
            raise not_found("run", f"unknown run '{run_id}'")
        status = run["status"]
        deciding = decision.get("approve") is not None
        # A decision on a run that does not wait is the runtime's to refuse (engine/runtime/approvals.py): 409
        # `already_decided` with the gate's own refusal when its gate was decided (a lost race, a second
        # decision), else 409 `not_waiting`.
        if not deciding and status == RunStatus.WAITING:
            raise conflict(
                "decision_needed",
                f"run {run_id} is waiting for an approval: send "
                '{"decision": "approve"} or {"decision": "reject"}',
            )
        if not deciding and status in (RunStatus.FINISHED, RunStatus.RUNNING, RunStatus.QUEUED):
            raise conflict("not_resumable", f"run {run_id} is {status}; nothing to resume")
        # The runtime judges and records a decision before its first event: take that step now, so
        # a refused decision is the caller's error and an accepted one is kept even if the run
        # then waits for a slot.
        service.continue_trace(run_id, traceparent)
        stream = queue.runs.stream(lambda: service.resume(run_id, decision))
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            first = None
        job = Job(run_id, run["flow"], run["version"], "resume", run["inputs"])

        async def events() -> AsyncGenerator[EventDict, None]:
            if first is not None:
                yield first
            async for event in stream:
                yield event

        try:
            return queue.submit(job, events)
        except ShuttingDown as exc:
            await stream.aclose()
            raise ApiError(503, "shutting_down", str(exc)) from None

    async def cancel_run(
        self, run_id: str, *, wait: bool = False, reason: str = "cancelled by a client"
    ) -> Job:
        """Stop a run this server holds: a queued one never starts, a running one is interrupted (checkpointed,
        resumable, as at shutdown), its error `reason`; with `wait`, once it has stopped. 409 `not_running`
        for any other run."""
        _, queue = self._ready()
        job = queue.jobs.get(run_id)
        if job is None or job.task is None:
            await self.known_run(run_id)
            raise conflict("not_running", f"run {run_id} is not queued or running in this server")
        settled = job.settled
        if settled is None:
            # once only: a second cancel would land in the execution recording its interruption
            job.cancel_reason = reason
            cancelling.give(run_id, reason)  # the execution records it as the run's error
            job.task.cancel()
            settled = job.settled = asyncio.get_running_loop().create_task(
                self._settle_cancelled(job, job.task)
            )
            self._settling.add(settled)
            settled.add_done_callback(self._settling.discard)
        if wait:
            await asyncio.wait([settled])
        return job

    async def ask_cancel(self, run_id: str, reason: str) -> bool:
        """Ask that run `run_id` stop wherever it runs: here at once, on another replica through the
        database (engine/serve/cancels.py). False when it cannot be asked: on SQLite, a run of another
        process. Returns without waiting for it to stop."""
        _, queue = self._ready()
        if run_id in queue.jobs:
            await self.cancel_run(run_id, reason=reason)
            return True
        return await self._ask_others(cancels.Request(reason, run=run_id))

    @property
    def shares_database(self) -> bool:
        """Whether servers sharing this one's database can be asked to stop runs (Postgres)."""
        return self.service is not None and self.service.engine.location.postgres

    async def ask_cancel_turns(self, thread_id: str, before: str, reason: str) -> bool:
        """Ask every other server to stop the turns of `thread_id` it accepted by `before` (running,
        or waiting for the thread's turn); False on SQLite, whose servers cannot be asked."""
        return await self._ask_others(cancels.Request(reason, thread=thread_id, before=before))

    async def _ask_others(self, request: cancels.Request) -> bool:
        service, _ = self._ready()
        write = backends.cancel_request(service.engine.location, request.encode())
        if write is None:
            return False
        await service.engine.db.writer.write(write)
        return True

    def _cancel_asked(self, payload: str) -> None:
        """A server asked that runs stop (`_ask_others`; this one's own requests too): this one stops
        those it holds."""
        request = cancels.Request.decode(payload)
        if request is None or self.queue is None:
            return
        for job in request.chooses(list(self.queue.jobs.values())):
            task = asyncio.get_running_loop().create_task(
                self.cancel_run(job.run_id, reason=request.reason)
            )
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)

    async def _settle_cancelled(self, job: Job, task: asyncio.Task[None]) -> None:
        """Once a cancelled job's task has ended: a run whose execution had not begun (queued, or recorded
        started and not yet executing) records nothing itself, and its row would stay queued or running
        under this server, for another server to adopt and run after it was cancelled. It is recorded
        `interrupted` here (an execution that began has recorded its own end: this changes nothing then)."""
        await asyncio.wait([task])
        # the reason is taken by an execution that began, which records its own end: its row may be
        # gone by now (a newer turn's rollback deletes it) and must not be written again
        began = cancelling.take(job.run_id) is None and job.cancel_reason is not None
        service, _ = self._ready_parts()
        why = f"{job.cancel_reason or 'cancelled by a client'} before it started"
        try:
            entry = self.catalog.flow(job.flow)
            if not began and job.kind == "start" and job.thread is not None and entry is not None:
                # a turn that waited for its thread's turn has no row yet (none: the flow was removed)
                await service.record_unadmitted(
                    job.run_id, entry.bundle, job.inputs, job.thread, job.created, why
                )
            else:
                await service.record_cancelled(job.run_id, why)
        except _SETTLE_ERRORS as exc:  # the row stays as it was; the log says why
            self.log.warning("cancel_not_recorded", extra=fields(run=job.run_id, error=str(exc)))

    async def _record_unended(self, job: Job, exc: Exception) -> None:
        """A job whose execution an error ended before the runtime recorded the run's end (its pinned
        definition could not be read back, its context not built, the database failed as it recorded
        the end): its row would stay queued or running under this server — kept alive by nobody but
        this process, and never resumable while it lives. It is recorded `failed`, with the error."""
        service, _ = self._ready_parts()
        try:
            await service.record_unended(
                job.run_id, f"the server could not execute the run: {type(exc).__name__}: {exc}"
            )
        except (
            _SETTLE_ERRORS
        ) as error:  # the row stays as it was (on a replica its lease runs out); the log says why
            self.log.warning("run_end_not_recorded", extra=fields(run=job.run_id, error=str(error)))

    def thread_jobs(self, thread_id: str) -> list[Job]:
        """The turns of a thread this server holds (queued or running)."""
        return (
            [job for job in self.queue.jobs.values() if job.thread == thread_id]
            if self.queue
            else []
        )

    def _notify_of(self, flow: str) -> tuple[list[NotifySpec], list[str]]:
        """The yard-level `notify:` of `flow` as served now, and the hosts its yard allows."""
        entry = self.catalog.flow(flow)
        if entry is None:
            return [], []
        config = entry.bundle.config
        return config.notify, config.http.allowed_hosts

    async def known_run(self, run_id: str) -> None:
        """404 unless the run is stored or held by this server (checked before judging a body)."""
        service, queue = self._ready()
        if run_id not in queue.jobs and await service.get_run(run_id) is None:
            raise not_found("run", f"unknown run '{run_id}'")

    # ---- replicas (docs/postgres.md) ----------------------------------------------------------

    async def _leases(self, replica: liveness.Replica) -> None:
        """Every third of a lease: renew this replica's leases (its heartbeat), and take over the runs
        of replicas whose lease ran out (they died) from their last checkpoint."""
        interval = replica.lease_seconds / 3
        while not self._stop.is_set():
            try:
                await self._heartbeat(replica)
                await self._take_over(replica)
            # a database hiccup must not end the heartbeat: the next round retries
            except Exception:
                self.log.exception("lease_round_failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=interval)

    async def _heartbeat(self, replica: liveness.Replica) -> None:
        """Push ahead the lease of the runs this server holds now (its jobs), and of no other row."""
        if self.service is not None and self.queue is not None and self.queue.jobs:
            held = list(self.queue.jobs)
            await self.service.engine.db.writer.write(
                store.heartbeat(replica.id, replica.lease_until(), held)
            )

    async def _take_over(self, replica: liveness.Replica | None) -> list[str]:
        """Go on with the runs of servers that died: resume their running runs from their last
        checkpoint (while the global limit has room), and start their queued ones here. Every claim
        is a conditional UPDATE (store.claim, store.adopt_queued), so of several replicas trying at
        once exactly one continues each run. Without `replica` (a server that holds no leases, at
        its start): only the queued runs."""
        service, queue = self.service, self.queue
        if service is None or queue is None or not queue.accepting:
            return []
        me = replica.id if replica is not None else ""
        leased = await service.engine.db.aread(lambda conn: store.leased_runs(conn, me))
        taken: list[str] = []
        room: int | None = None
        for record in leased:
            if record.id in queue.jobs or effective_status(record) != RunStatus.INTERRUPTED:
                continue
            if record.status == RunStatus.QUEUED:
                if not await service.adopt(record):
                    continue  # another server was quicker
                job = Job(record.id, record.flow, record.version, "start", record.inputs)
                try:
                    self._submit_queued(job, record, None)
                except ApiError:
                    break  # shutting down: released again
                self.log.warning(
                    "run_adopted", extra=fields(run=record.id, from_replica=record.owner_replica)
                )
                self.metrics.took_over("queued")
                taken.append(record.id)
                continue
            if replica is None:
                continue
            # a running run kept no checkpoint to go on from (durability none): it stays interrupted;
            # a queued one (above) never ran, so it is adopted in any mode
            if record.mode in NO_CHECKPOINTS:
                continue
            if self.global_limit is not None:  # a taken-over run counts as running at once
                room = self.global_limit - await service.running_count() if room is None else room
                if room <= 0:
                    continue  # the next round, once a slot is free
            try:
                await self.resume_run(record.id, {})
            except Exception as exc:  # another replica was quicker, or the run cannot go on
                self.log.info(
                    "run_not_taken_over",
                    extra=fields(run=record.id, from_replica=record.owner_replica, reason=str(exc)),
                )
                continue
            if room is not None:
                room -= 1
            self.log.warning(
                "run_taken_over", extra=fields(run=record.id, from_replica=record.owner_replica)
            )
            self.metrics.took_over("running")
            taken.append(record.id)
        return taken

    # ---- scheduler hooks --------------------------------------------------------------------

    async def _fire(self, entry: FlowEntry, when: datetime) -> str | None:
        schedule = entry.bundle.flow.schedule
        try:
            job = await self.start_run(entry, schedule.inputs if schedule else {})
        except Exception as exc:  # a schedule with bad inputs must not stop the others
            self.log.error(
                "schedule_failed",
                extra=fields(flow=entry.name, fire_time=when.isoformat(), error=str(exc)),
            )
            return None
        self.log.info(
            "schedule_fired",
            extra=fields(flow=entry.name, fire_time=when.isoformat(), run=job.run_id),
        )
        return job.run_id

    async def _fire_cron(self, cron: crons.ApiCron, when: datetime) -> str | None:
        """A fire time of a cron made over the API: a run of its flow with the inputs it was made with (a
        turn of its thread, which waits for the thread's turn before it, for a thread's cron)."""
        said = {"flow": cron.flow, "cron": cron.id, "fire_time": when.isoformat()}
        entry = self.catalog.flow(cron.flow)
        if entry is None:  # the flow was removed (or is broken) since: the cron waits for it
            self.log.error("cron_failed", extra=fields(**said, error=f"no flow '{cron.flow}' now"))
            return None
        try:
            job = await self.start_run(
                entry,
                cron.payload.get("inputs") or {},
                thread=cron.thread_id,
                webhook=cron.payload.get("webhook"),
            )
        except Exception as exc:  # a cron whose flow changed its inputs must not stop the others
            self.log.error("cron_failed", extra=fields(**said, error=str(exc)))
            return None
        self.log.info("cron_fired", extra=fields(**said, run=job.run_id))
        return job.run_id

    async def _expire_approvals(self, now: datetime) -> int:
        """The scheduler's housekeeping: decide the gates whose timeout has passed (their on_timeout).
        Deciding continues runs, so it happens on the run loop (engine/serve/offload.py)."""
        service, queue = self.service, self.queue
        if service is None or queue is None:
            return 0
        return len(await queue.runs.call(lambda: service.engine.expire(now)))


def check_size(value: Any, limit: int, what: str) -> None:
    """413 when `value` takes more than `limit` bytes as UTF-8 JSON (server.max_input_bytes)."""
    size = len(
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode(
            "utf-8", "backslashreplace"
        )
    )
    if size > limit:
        raise ApiError(
            413,
            "inputs_too_large",
            f"{what} take {size} bytes as JSON; the limit is {limit} "
            "(server.max_input_bytes in blockyard.yaml)",
        )
