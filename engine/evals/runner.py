"""Running eval cases: each a run of its side's pinned flow on one engine, at most `jobs` at a time.

The runs go to a throw-away state database (a SQLite file in a temporary folder, whatever the yard's
`database:` says): evals never add runs to the yard's own. A case without history runs with
durability `none` and no trace when its flow can (no approval gate); a case with history runs its
turns as one conversation thread (which needs checkpoints). What a case's model calls spent is read
from its runs' `model_call` events. Its latency is its runs' wall time, but a reply the response cache
gave counts as long as its call took when it was made — a cached re-run reports what the case takes
with the model, as it reports what it costs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables.config import var_child_runnable_config

from engine.core.errors import BlockyardError, UsageError
from engine.core.events import APPROVAL_REQUIRED, MODEL_CALL, RUN_FINISHED, TERMINAL_TYPES
from engine.core.usage import Spend
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.definitions.project import Project
from engine.evals import assertions, judge
from engine.evals.results import CaseResult, Check, EvalResult
from engine.evals.targets import Target
from engine.models.base import StructuredModel, StructuredRequest
from engine.models.cached import ReplyCache, caching
from engine.models.resolver import ModelResolver
from engine.nodes.context import RunContext
from engine.runtime.engine import Engine
from engine.spec import ModelBlock
from engine.spec.evals import Assertion
from engine.state.location import Location
from engine.validate.evalfiles import EvalDef, LoadedCase, typed_inputs


class _Detached:
    """A block's structured model whose calls are made outside LangChain's callback tree, and whose
    streamed text makes no token events: nothing follows an eval run's LangChain callbacks (no
    `messages` stream, no tracing of the graph) or reads its tokens, and that bookkeeping of a streamed
    reply — a run per call, an event per piece — costs a sixth of the call. The reply is still streamed,
    and what is asked and answered, measured (its time to the first token too), priced and cached is
    the same."""

    def __init__(self, inner: StructuredModel) -> None:
        self.inner = inner

    async def structured(self, request: StructuredRequest) -> JsonDict:
        if request.on_token is not None:
            request = dataclasses.replace(request, on_token=_unread)
        token = var_child_runnable_config.set(None)
        try:
            return await self.inner.structured(request)
        finally:
            var_child_runnable_config.reset(token)


def _unread(text: str) -> None:
    """Where an eval run's streamed text goes: nobody reads it as it arrives."""


class EvalModels(ModelResolver):
    """The models of eval runs: llm and decide blocks' calls detached from LangChain's callbacks."""

    def for_block(self, block: ModelBlock) -> StructuredModel:
        return _Detached(super().for_block(block))


class EvalEngine(Engine):
    """The engine of eval runs: as any, but its runs of one definition share one model resolver, so the
    cases of an eval make one client per model profile (a provider's client holds an HTTP client and
    costs milliseconds to build), not one per case (eval runs have no run scripts, which a resolver is
    otherwise made per run for); and their model calls are `EvalModels`'."""

    def __init__(self, root: Path, state_path: Path) -> None:
        super().__init__(root, state_path, env=None)
        self._resolvers: dict[str, ModelResolver] = {}
        self._resolvers_lock = threading.Lock()

    def context(
        self,
        bundle: Bundle,
        run_id: str,
        thread_id: str | None = None,
        output_dir: str | None = None,
    ) -> tuple[RunContext, str | None]:
        context, note = super().context(bundle, run_id, thread_id, output_dir)
        digest = self.pin(bundle)[0]
        with self._resolvers_lock:
            models = self._resolvers.get(digest)
            if models is None:
                models = self._resolvers[digest] = EvalModels(bundle.config, self.env)
        context.models = models
        return context, note


def scratch_engine(project: Project, folder: Path) -> Engine:
    """An engine for the working tree's yard (its Python tools, its keys masked) on a throw-away SQLite
    state database in `folder`; runs write their files to their own workspaces there, never into the yard."""
    path = folder / "state.db"
    engine = EvalEngine(project.root, path)
    # not the yard's database (nor BLOCKYARD_DATABASE_URL's): runs are throw-away
    engine.location = Location(path)
    engine.mask_keys(project.config.models.values())
    engine.output_dirs = False
    return engine


@dataclass
class Job:
    """One case of one eval on one side; its result goes into `into`."""

    definition: EvalDef
    target: Target
    case: LoadedCase
    into: EvalResult


@dataclass
class _Calls:
    """What one case's runs' model calls spent, and what the cache gave of them."""

    spend: Spend = field(default_factory=Spend)
    cached: int = 0
    saved_usd: float = 0.0
    kept_ms: float = 0.0  # how long the cached calls took when they were made
    replay_ms: float = 0.0  # how long replaying them took now

    def add(self, data: Mapping[str, Any]) -> None:
        self.spend.add(data)
        if data.get("cached"):
            self.cached += 1
            self.saved_usd += float(data.get("cost_usd") or 0.0)
            self.kept_ms += float(data.get("original_latency_ms") or 0.0)
            self.replay_ms += float(data.get("latency_ms") or 0.0)


class Runner:
    """Runs jobs concurrently (`jobs` at a time) on `engine`; judges on `models` (the working tree's
    profiles); model replies through `cache` when there is one. `on_case` is told each result."""

    def __init__(
        self,
        engine: Engine,
        models: ModelResolver,
        *,
        jobs: int = 4,
        cache: ReplyCache | None = None,
        on_case: Callable[[Job, CaseResult], None] | None = None,
    ) -> None:
        self.engine = engine
        self.models = models
        self.jobs = max(1, jobs)
        self.cache = cache
        self.on_case = on_case
        self._ids = itertools.count(1)
        self._stamp = format(time.time_ns() // 1_000_000, "x")
        self._without_checkpoints: dict[str, bool] = {}

    async def run(self, jobs: list[Job]) -> None:
        """Run every job; each result is appended to its eval's result in the order of the jobs."""
        slots = asyncio.Semaphore(self.jobs)
        results: list[CaseResult | None] = [None] * len(jobs)

        async def one(position: int, job: Job) -> None:
            async with slots:
                found = await self.case(job)
            results[position] = found
            if self.on_case is not None:
                self.on_case(job, found)

        self._warm(jobs)
        with caching(self.cache):
            await asyncio.gather(*(one(position, job) for position, job in enumerate(jobs)))
        for job, found in zip(jobs, results, strict=True):
            if found is not None:
                job.into.cases.append(found)

    async def case(self, job: Job) -> CaseResult:
        loaded, target = job.case, job.target
        result = CaseResult(job.definition.name, loaded.name, loaded.spot.where, "error")
        bundle = target.bundle
        if bundle is None:
            result.error = target.problem or "nothing to run"
            return result
        inputs = typed_inputs(loaded, target.inputs)
        calls = _Calls()
        run_id = f"eval-{self._stamp}-{next(self._ids)}"
        began = time.perf_counter()
        try:
            thread = run_id if loaded.case.history else None
            for number, said in enumerate(loaded.case.history, start=1):
                turn = said if isinstance(said, dict) else {"message": said}
                status, _, error = await self._run(
                    bundle, turn, f"{run_id}-h{number}", thread, calls
                )
                if status != "finished":
                    result.status, result.error = (
                        status,
                        f"history turn {number}: {error or 'the run is ' + status}",
                    )
                    break
            else:
                result.status, result.outputs, result.error = await self._run(
                    bundle, inputs, run_id, thread, calls
                )
        except BlockyardError as exc:  # the run could not start (its inputs, ...)
            result.status, result.error = "error", str(exc)
        wall_ms = (time.perf_counter() - began) * 1000
        result.latency_ms = max(0.0, wall_ms - calls.replay_ms) + calls.kept_ms
        result.spend = calls.spend
        result.cached_calls, result.saved_usd = calls.cached, calls.saved_usd
        if result.status == "finished":
            result.checks = await self._checks(job, inputs, result)
        return result

    async def _run(
        self, bundle: Bundle, inputs: JsonDict, run_id: str, thread: str | None, calls: _Calls
    ) -> tuple[str, JsonDict | None, str | None]:
        """(status, outputs, error) of one run of `bundle`."""
        quick = thread is None and self._can_skip_checkpoints(bundle)
        last = None
        async with aclosing(
            self.engine.astream(
                bundle,
                inputs,
                run_id=run_id,
                thread=thread,
                durability="none" if quick else None,
                trace=False if quick else None,
            )
        ) as events:
            async for event in events:
                if event.type == MODEL_CALL:
                    calls.add(event.data)
                elif event.type in TERMINAL_TYPES:
                    last = event
        if last is None:
            return "error", None, "the run ended without a result"
        if last.type == RUN_FINISHED:
            outputs = last.data.get("outputs")
            return "finished", dict(outputs) if isinstance(outputs, dict) else {}, None
        if last.type == APPROVAL_REQUIRED:
            gate = last.data.get("gate") or last.step
            return (
                "waiting",
                None,
                (
                    f"the run waits at approval gate '{gate}': an eval case must run to its end "
                    "(evals decide no gates)"
                ),
            )
        return (
            str(last.data.get("status") or "failed"),
            None,
            str(last.data.get("error") or "the run failed"),
        )

    def _warm(self, jobs: list[Job]) -> None:
        """Compile each flow and load its model clients before the clock runs: the first case of a flow
        would otherwise take the compile and the provider's import (seconds) as its latency."""
        seen: set[str] = set()
        for job in jobs:
            bundle = job.target.bundle
            if bundle is None or self.engine.pin(bundle)[0] in seen:
                continue
            seen.add(self.engine.pin(bundle)[0])
            quick = not job.case.case.history and self._can_skip_checkpoints(bundle)
            models = ModelResolver(bundle.config)
            try:
                self.engine.compiled(bundle, durable=not quick, inline=True)
                for block in bundle.blocks.values():
                    if isinstance(block, ModelBlock):
                        models.for_block(block)
            except BlockyardError:  # each case of it reports this as its run's failure
                continue

    def _can_skip_checkpoints(self, bundle: Bundle) -> bool:
        digest = self.engine.pin(bundle)[0]
        if digest not in self._without_checkpoints:
            try:
                self.engine.durability(bundle, "none", False)
                self._without_checkpoints[digest] = True
            except UsageError:  # an approval gate: it needs checkpoints to wait at
                self._without_checkpoints[digest] = False
        return self._without_checkpoints[digest]

    async def _checks(self, job: Job, inputs: JsonDict, result: CaseResult) -> list[Check]:
        """Every assertion of the case (the eval's, then its own): judges concurrently, the others at once."""
        wanted: list[Assertion] = [*job.definition.spec.assert_, *job.case.case.assert_]
        outputs = result.outputs or {}
        declared = job.target.outputs
        spend = result.spend
        expected = job.case.case.expected
        scope = {
            "outputs": outputs,
            "inputs": inputs,
            "expected": expected,
            "usage": {
                **spend.as_dict(),
                "tokens": spend.tokens,
                "latency_ms": round(result.latency_ms, 1),
            },
        }
        found: list[Check | None] = [None] * len(wanted)
        judging: list[tuple[int, Any]] = []
        recorders: list[judge.JudgeCalls] = []
        for position, assertion in enumerate(wanted):
            name = assertions.label(assertion)
            if assertion.kind == "judge" and assertion.judge is not None:
                _, output = assertions.subject(assertion.output, outputs, declared)
                if output is assertions.MISSING:  # nothing to judge: no call
                    found[position] = Check(
                        "judge",
                        name,
                        False,
                        0.0,
                        f"output '{assertion.output}' missing "
                        f"(outputs: {', '.join(outputs) or 'none'})",
                    )
                    continue
                calls = judge.JudgeCalls()
                recorders.append(calls)
                judging.append(
                    (
                        position,
                        judge.judge(
                            self.models,
                            assertion.judge,
                            name,
                            job.definition.name,
                            job.case.name,
                            inputs,
                            expected,
                            output,
                            calls,
                        ),
                    )
                )
                continue
            passed, why = assertions.check(
                assertion, outputs, declared, scope, spend, result.latency_ms
            )
            found[position] = Check(
                assertion.kind, name, passed, 1.0 if passed else 0.0, "" if passed else why
            )
        if judging:
            verdicts = await asyncio.gather(*(call for _, call in judging))
            for (position, _), verdict in zip(judging, verdicts, strict=True):
                found[position] = verdict
            for calls in recorders:
                result.judge_spend.merge(calls.spend)
                result.cached_calls += calls.cached
                result.saved_usd += calls.saved_usd
        return [check for check in found if check is not None]
