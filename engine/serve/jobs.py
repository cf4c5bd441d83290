"""Runs executed by the server: a bounded number at once, the rest queued in arrival order.

Each accepted run (a start or a resume) becomes a `Job`: an asyncio task that waits for a slot
(config.server.max_concurrent_runs), streams the run through the runtime, publishes every event
to the broker for live followers, and settles the job's `result` with how the execution ended.
A client that stops waiting never cancels a run; only shutdown does, after a grace period, and
the runtime then records the run as `interrupted` (resumable).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from engine.core.events import (
    APPROVAL_REQUIRED,
    RUN_FINISHED,
    TERMINAL_TYPES,
    EventDict,
    RunStatus,
    now_iso,
)
from engine.core.values import JsonDict
from engine.serve.broker import Broker
from engine.serve.logs import fields, get_logger
from engine.serve.offload import RunLoop
from engine.state.database import StateError


class ShuttingDown(Exception):
    """The server is stopping and accepts no new runs."""


@dataclass
class Job:
    """A run accepted by this server: queued, then running, then settled."""

    run_id: str
    flow: str
    version: int
    kind: str  # start | resume
    inputs: JsonDict
    thread: str | None = None  # a turn of this conversation thread
    created: str = field(default_factory=now_iso)
    state: str = RunStatus.QUEUED  # then RunStatus.RUNNING, then "done"
    result: asyncio.Future[JsonDict] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    task: asyncio.Task[None] | None = None
    cancel_reason: str | None = (
        None  # why a client cancelled it (Server.cancel_run); None: shutdown stops it
    )
    # once cancelled (Server.cancel_run): the task that records what the cancel left to record
    settled: asyncio.Task[None] | None = None

    def summary(self) -> JsonDict:
        """A run row for a job the runs table does not show yet."""
        return {
            "id": self.run_id,
            "flow": self.flow,
            "version": self.version,
            "status": self.state,
            "inputs": self.inputs,
            "outputs": None,
            "error": None,
            "error_step": None,
            "created": self.created,
            "started": None,
            "finished": None,
            "duration": 0.0,
            "thread_id": self.thread,
        }


def result_of(job: Job, terminal: list[EventDict]) -> JsonDict:
    """How an execution ended, told by its terminal events (the runtime's RunResult as JSON)."""
    result: JsonDict = {
        "run_id": job.run_id,
        "flow": job.flow,
        "version": job.version,
        "outputs": None,
        "error": None,
        "step": None,
        "waiting": [],
    }
    if not terminal:
        return {
            **result,
            "status": RunStatus.INTERRUPTED,
            "error": "the run ended without a final event",
        }
    last = terminal[-1]
    data = last.get("data") or {}
    if last["type"] == RUN_FINISHED:
        return {**result, "status": RunStatus.FINISHED, "outputs": data.get("outputs")}
    if last["type"] == APPROVAL_REQUIRED:
        gates = [e.get("data") or {} for e in terminal if e["type"] == APPROVAL_REQUIRED]
        return {**result, "status": RunStatus.WAITING, "step": last.get("step"), "waiting": gates}
    return {
        **result,
        "status": data.get("status", RunStatus.FAILED),
        "error": data.get("error"),
        "step": last.get("step"),
    }


class Waker:
    """Wakes the jobs waiting for a slot of the global limit: when a run of this server ends, or
    when another server's run ends (Postgres's NOTIFY, engine/state/postgres.py)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def wake(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        """Until the next `wake`, or `timeout` seconds (a lost notification, or a SQLite file: other
        processes' runs end unannounced)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)


# Whether a job may start once it has a slot of this server: False when its run is gone (another
# server started it); a durable queued run waits here for a slot of the global limit.
Admit = Callable[[], Awaitable[bool]]
# What becomes of the run of a job whose execution an error ended before the runtime recorded its end
Unended = Callable[[Job, Exception], Awaitable[None]]


class JobQueue:
    """Accepts runs, bounds how many execute, and drains on shutdown."""

    def __init__(self, broker: Broker, limit: int, unended: Unended | None = None) -> None:
        self.broker = broker
        self.limit = limit
        self.unended = unended
        self.jobs: dict[str, Job] = {}
        self.accepting = True
        self.waker = Waker()
        self._slots = asyncio.Semaphore(limit)
        self.log = get_logger()
        # where executions run: never on the server's own loop (engine/serve/offload.py)
        self.runs = RunLoop()

    @property
    def running(self) -> int:
        return sum(1 for job in self.jobs.values() if job.state == RunStatus.RUNNING)

    @property
    def queued(self) -> int:
        return sum(1 for job in self.jobs.values() if job.state == RunStatus.QUEUED)

    async def reserve(self) -> bool:
        """Take a slot now if one is free and no job waits for one (then it is the caller's, for
        `submit(..., reserved=True)`, or to give back with `unreserve`); False otherwise."""
        if self._slots.locked():
            return False
        await self._slots.acquire()  # free: returns at once
        return True

    def unreserve(self) -> None:
        """Give back a slot `reserve` took, for a job that was not submitted after all."""
        self._slots.release()

    def submit(
        self,
        job: Job,
        events: Callable[[], AsyncGenerator[EventDict, None]],
        admit: Admit | None = None,
        *,
        reserved: bool = False,
    ) -> Job:
        """Queue `job`; `events()` is called once a slot is free (and `admit()` said yes) and streams
        the execution (made with `self.runs.stream`, so that it executes on the run loop). `reserved`:
        the job has its slot already (`reserve`) and is running from now on."""
        if not self.accepting:
            raise ShuttingDown("the server is shutting down")
        self.jobs[job.run_id] = job
        self.broker.open(job.run_id)
        if reserved:
            job.state = RunStatus.RUNNING
        job.task = asyncio.create_task(
            self._execute(job, events, admit, reserved), name=f"run-{job.run_id}"
        )
        self.log.info(
            "run_accepted",
            extra=fields(
                run=job.run_id,
                flow=job.flow,
                version=job.version,
                kind=job.kind,
                queued=self.queued,
            ),
        )
        return job

    async def _execute(
        self,
        job: Job,
        events: Callable[[], AsyncGenerator[EventDict, None]],
        admit: Admit | None,
        reserved: bool = False,
    ) -> None:
        terminal: list[EventDict] = []  # the events that ended or paused the run, as they come
        began = time.perf_counter()
        try:
            await self._run(job, events, admit, reserved, terminal, began)
        except asyncio.CancelledError:
            self._cancelled(job, terminal)
            if job.cancel_reason is None:
                raise
        except StateError as exc:
            await self._state_lost(job, exc, terminal, began)
        except (
            Exception
        ) as exc:  # a usage problem found by the runtime (run id taken, ...) or a bug
            await self._rejected(job, exc)
        finally:
            job.state = "done"
            self.broker.close(job.run_id)
            self.jobs.pop(job.run_id, None)
            self.waker.wake()  # a slot of the global limit may be free

    async def _run(
        self,
        job: Job,
        events: Callable[[], AsyncGenerator[EventDict, None]],
        admit: Admit | None,
        reserved: bool,
        terminal: list[EventDict],
        began: float,
    ) -> None:
        """The job in a slot: admitted, its events published, its result set."""
        if not reserved:
            await self._slots.acquire()
        try:
            if admit is not None and not await admit():
                job.result.set_result(
                    {
                        **result_of(job, []),
                        "status": RunStatus.INTERRUPTED,
                        "error": "another server started this run",
                    }
                )
                self.log.warning(
                    "run_started_elsewhere", extra=fields(run=job.run_id, flow=job.flow)
                )
                return
            job.state = RunStatus.RUNNING
            async with aclosing(events()) as stream:
                async for event in stream:
                    self.broker.publish(event)
                    if event["type"] in TERMINAL_TYPES:
                        terminal.append(event)
        finally:
            self._slots.release()
        result = result_of(job, terminal)
        job.result.set_result(result)
        self.log.info(
            "run_ended",
            extra=fields(
                run=job.run_id,
                flow=job.flow,
                status=result["status"],
                step=result["step"],
                ms=round((time.perf_counter() - began) * 1000, 1),
            ),
        )

    def _cancelled(self, job: Job, terminal: list[EventDict]) -> None:
        """A job cancelled (by a client, or the server stopping): its result says so."""
        was = job.state
        job.result.set_result(
            {
                **result_of(job, terminal),
                "status": RunStatus.INTERRUPTED,
                "error": job.cancel_reason or "the server stopped before the run finished",
            }
        )
        self.log.warning("run_cancelled", extra=fields(run=job.run_id, flow=job.flow, state=was))

    async def _state_lost(
        self, job: Job, exc: StateError, terminal: list[EventDict], began: float
    ) -> None:
        """The state database failed under the execution (its server restarted, or ended this replica's
        session while it was frozen) and the runtime could not record the run's end: the run was not
        refused, its execution stopped where it was. Resumable from its last checkpoint; on a replica
        whose lease ran out meanwhile, another replica has it already, and its row is no longer ours."""
        job.result.set_exception(exc)
        job.result.exception()  # retrieved: nobody may be waiting for it
        self.log.warning(
            "run_ended",
            extra=fields(
                run=job.run_id,
                flow=job.flow,
                status=RunStatus.INTERRUPTED,
                step=result_of(job, terminal)["step"],
                error=f"{type(exc).__name__}: {exc}",
                ms=round((time.perf_counter() - began) * 1000, 1),
            ),
        )
        if self.unended is not None:
            # only a row still held by this server changes (store.fail_unended)
            await self.unended(job, exc)

    async def _rejected(self, job: Job, exc: Exception) -> None:
        job.result.set_exception(exc)
        job.result.exception()  # retrieved: nobody may be waiting for it
        self.log.warning(
            "run_rejected",
            extra=fields(run=job.run_id, flow=job.flow, error=f"{type(exc).__name__}: {exc}"),
        )
        if self.unended is not None:
            # its row may still say queued or running under this server
            await self.unended(job, exc)

    async def drain(self, grace: float) -> None:
        """Stop accepting; let running runs finish for `grace` seconds, then interrupt them."""
        self.accepting = False
        queued = [job for job in self.jobs.values() if job.state == RunStatus.QUEUED and job.task]
        for job in queued:  # never started: nothing to checkpoint
            assert job.task is not None
            job.task.cancel()
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        if not tasks:
            return
        self.log.info(
            "draining",
            extra=fields(running=self.running, queued_dropped=len(queued), grace_s=grace),
        )
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=10.0)

    def close(self) -> None:
        """Stop the run loop (after `drain`)."""
        self.runs.close()
