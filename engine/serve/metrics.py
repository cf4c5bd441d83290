"""Prometheus metrics of one `blockyard serve` (`GET /metrics`, docs/observability.md).

Counters and histograms are fed by an observer of the server's engine (`Metrics.observe`, one of
`Engine.observers`, engine/runtime/observe.py), not by the broker: the engine tells it every event
of every execution this server runs, exactly once, with the run's record (its flow and version) at
hand — the starts and resumes of the job queue, and also the runs that gate timeouts continue
(`Engine.expire`, the scheduler's housekeeping), whose events never pass the broker. Runs other
replicas execute are theirs to count: summed over replicas, each run is counted once.

The gauges (queue depth, running runs, runs waiting at gates) are read when Prometheus scrapes
(`snapshot`, from the route): what this server holds, and for the waiting runs, the database.

The observer may lag (`told_later`): it is told on engine/core/later.py's thread, many executions in a
row, up to a second or so after the events, and a scrape first has it told what waits. It only adds
to plain numbers (`_Count`, `_Buckets`), found with one dict lookup per event; the client library's
metric families are made from them when Prometheus scrapes (`_Families`, a custom collector), and
`generate_latest` writes the text. The library's own Counter and Histogram take a lock and
validate their labels on every increment: three to five times the cost per event
(bench/bench_metrics.py). Only one thread at a time writes the numbers (engine/core/later.py does
its pieces one at a time); a scrape reads them whole, as Python reads a float.

Each server has its own `CollectorRegistry`, never the process's global one: tests start several
servers in one process, and an embedding application keeps its own metrics apart.

Labels are the flow, its version, the step, the provider and the model — never a run id — and each
is bounded (`_Bounded`): a TaskPlan names its own flow (POST /plans/runs), so past `MAX_FLOWS` flow
names (and `MAX_STEPS` step labels, `MAX_MODELS` models) new ones are counted as `_other`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from engine.core import later
from engine.core.events import (
    MODEL_CALL,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    STEP_FAILED,
    STEP_FINISHED,
    Event,
    RunStatus,
)
from engine.core.usage import TOKEN_KEYS
from engine.runtime.observe import told_later, told_only
from engine.state.store import RunRecord

T = TypeVar("T")
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # text/plain; version=0.0.4: what every Prometheus scrapes
OTHER = "_other"
MAX_FLOWS = 500
MAX_STEPS = 5000  # (flow, step) pairs
MAX_MODELS = 200  # (provider, model) pairs
CACHED = 20_000  # lookups kept per kind: more keys than this (TaskPlans' flow names) start the cache afresh
# seconds: a transform step takes milliseconds, an agent step minutes
STEP_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 90.0, 300.0)
RUN_BUCKETS = (0.05, 0.25, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
TOKEN_KINDS = {
    key: key.removesuffix("_tokens") for key in TOKEN_KEYS
}  # input | output | cached | reasoning


class _Count:
    """A counter's value for one set of label values."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class _Buckets:
    """A histogram's observations for one set of label values: how many fell in each bucket (the last
    one above every bound: +Inf), and their sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += (
            1  # the first bound >= value: Prometheus's `le`
        )
        self.total += value


class _Family:
    """One metric: its name, help, label names and its values per label values."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: tuple[str, ...],
        buckets: tuple[float, ...] | None = None,
    ) -> None:
        self.name, self.documentation, self.labels, self.buckets = (
            name,
            documentation,
            labels,
            buckets,
        )
        self.values: dict[tuple[str, ...], Any] = {}

    def count(self, *labels: str) -> _Count:
        found = self.values.get(labels)
        if found is None:
            found = self.values[labels] = _Count()
        assert isinstance(found, _Count)
        return found

    def histogram(self, *labels: str) -> _Buckets:
        found = self.values.get(labels)
        if found is None:
            assert self.buckets is not None
            found = self.values[labels] = _Buckets(self.buckets)
        assert isinstance(found, _Buckets)
        return found

    def collect(self) -> Metric:
        if self.buckets is None:
            counter = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
            for labels, value in list(self.values.items()):
                counter.add_metric(labels, value.value)
            return counter
        histogram = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        bounds = [*(_bound(bound) for bound in self.buckets), "+Inf"]
        for labels, buckets in list(self.values.items()):
            counts, running, cumulative = list(buckets.counts), 0, []
            for bound, count in zip(bounds, counts, strict=True):
                running += count
                cumulative.append((bound, float(running)))
            histogram.add_metric(labels, cumulative, buckets.total)
        return histogram


def _bound(value: float) -> str:
    # the client library's own spelling of a bucket's `le` (0.005, 1.0, 1800.0)
    return repr(float(value))


class _Families(Collector):
    """The counters and histograms, as the client library's metric families, made at each scrape."""

    def __init__(self, families: list[_Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield family.collect()


class _Gauges(Collector):
    """The gauges, as the last `Metrics.snapshot` read them."""

    def __init__(self) -> None:
        self.queued = 0
        self.running = 0
        self.waiting: dict[str, int] = {}

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "blockyard_queue_depth",
            "Runs this server accepted that wait for a slot.",
            value=self.queued,
        )
        yield GaugeMetricFamily(
            "blockyard_runs_running", "Runs executing on this server.", value=self.running
        )
        waiting = GaugeMetricFamily(
            "blockyard_runs_waiting",
            "Runs waiting at an approval gate, in the whole state database (every replica's).",
            labels=["flow"],
        )
        for flow, count in sorted(self.waiting.items()):
            waiting.add_metric([flow], count)
        yield waiting


class _Bounded:
    """The values a label has taken, at most `limit` of them; any value after that is `_other`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: set[Any] = set()

    def __call__(self, value: Any) -> bool:
        """Whether `value` keeps its own label value."""
        if value in self.seen:
            return True
        if len(self.seen) >= self.limit:
            return False
        self.seen.add(value)
        return True


HANDLED = (
    RUN_STARTED,
    RUN_FINISHED,
    RUN_FAILED,
    STEP_FINISHED,
    STEP_FAILED,
    MODEL_CALL,
)  # the events it counts
FLOW = ("flow", "version")
MODEL = ("flow", "provider", "model")


class Metrics:
    """One server's metrics: its registry, the observer that feeds it, the exposition."""

    def __init__(self) -> None:
        self._declare_runs()
        self._declare_models()
        self.taken_over = _Family(
            "blockyard_runs_taken_over",
            "Runs of dead replicas this server went on with: kind "
            "running (resumed from its checkpoint) or queued (started).",
            ("kind",),
        )
        for kind in (
            "running",
            "queued",
        ):  # at 0 from the start: `increase()` sees the first take-over
            self.taken_over.count(kind)
        self.gauges = _Gauges()
        self.registry = CollectorRegistry()
        self.registry.register(
            _Families(
                [
                    self.runs_started,
                    self.runs_resumed,
                    self.runs_finished,
                    self.runs_failed,
                    self.runs_interrupted,
                    self.run_duration,
                    self.step_duration,
                    self.model_calls,
                    self.model_latency,
                    self.tokens,
                    self.cost,
                    self.unpriced,
                    self.taken_over,
                ]
            )
        )
        self.registry.register(self.gauges)
        self._flows = _Bounded(MAX_FLOWS)
        self._steps = _Bounded(MAX_STEPS)
        self._models = _Bounded(MAX_MODELS)
        # what each event adds to, found with one dict lookup: a run's flow version, a step, a model
        self._runs: dict[tuple[str, int], _RunValues] = {}
        self._step_values: dict[tuple[str, int, str | None], _Buckets] = {}
        self._model_values: dict[tuple[str, int, Any, Any], _ModelValues] = {}
        self._handlers: dict[str, Callable[[RunRecord, Event], None]] = {
            RUN_STARTED: self._started,
            RUN_FINISHED: self._finished,
            RUN_FAILED: self._failed,
            STEP_FINISHED: self._step,
            STEP_FAILED: self._step,
            MODEL_CALL: self._model_call,
        }

    def _declare_runs(self) -> None:
        """The families of runs and steps."""
        self.runs_started = _Family(
            "blockyard_runs_started", "Runs that started on this server (not resumes).", FLOW
        )
        self.runs_resumed = _Family(
            "blockyard_runs_resumed",
            "Executions that went on with a run (a decided gate, a resume, a take-over).",
            FLOW,
        )
        self.runs_finished = _Family(
            "blockyard_runs_finished", "Runs that finished on this server.", FLOW
        )
        self.runs_failed = _Family(
            "blockyard_runs_failed", "Runs that failed on this server.", FLOW
        )
        self.runs_interrupted = _Family(
            "blockyard_runs_interrupted",
            "Executions interrupted before they ended (shutdown, a cancel): resumable.",
            FLOW,
        )
        self.run_duration = _Family(
            "blockyard_run_duration_seconds",
            "Duration of the runs that finished, over all their executions.",
            FLOW,
            RUN_BUCKETS,
        )
        self.step_duration = _Family(
            "blockyard_step_duration_seconds",
            "Duration of step executions (each map item "
            "and foreach iteration, each attempt), finished or failed.",
            ("flow", "step"),
            STEP_BUCKETS,
        )

    def _declare_models(self) -> None:
        """The families of model calls: their outcomes, latency, tokens and cost."""
        self.model_calls = _Family(
            "blockyard_model_calls", "Model calls; outcome is ok or error.", (*MODEL, "outcome")
        )
        self.model_latency = _Family(
            "blockyard_model_call_duration_seconds", "Latency of model calls.", MODEL, MODEL_BUCKETS
        )
        self.tokens = _Family(
            "blockyard_model_tokens",
            "Tokens of model calls as providers reported them; kind is "
            "input, output, cached or reasoning (cached and reasoning are parts of input and "
            "output).",
            (*MODEL, "kind"),
        )
        self.cost = _Family(
            "blockyard_model_cost_usd",
            "What model calls cost in US dollars, for the calls whose price is known.",
            MODEL,
        )
        self.unpriced = _Family(
            "blockyard_model_calls_unpriced",
            "Model calls whose price is not known (no "
            "`pricing:` and none published): not in blockyard_model_cost_usd_total.",
            MODEL,
        )

    # ---- the observer ---------------------------------------------------------------------------

    @told_later
    @told_only(HANDLED)
    def observe(self, run: RunRecord, event: Event, execution: Any) -> None:
        """An `Observer` (engine/runtime/observe.py): told every event of every execution of the server."""
        handler = self._handlers.get(event.type)
        if handler is not None:
            handler(run, event)

    def _flow(self, flow: str, version: int) -> tuple[str, str]:
        return (flow, str(version)) if self._flows(flow) else (OTHER, OTHER)

    def _run(self, run: RunRecord) -> _RunValues:
        key = (run.flow, run.version)
        found = self._runs.get(key)
        if found is None:
            found = _cached(self._runs, key, _RunValues(self, *self._flow(*key)))
        return found

    def _started(self, run: RunRecord, event: Event) -> None:
        values = self._run(run)
        (values.resumed if event.data.get("resumed") else values.started).inc()

    def _finished(self, run: RunRecord, event: Event) -> None:
        values = self._run(run)
        values.finished.inc()
        seconds = _seconds(event.data.get("duration_ms"))
        if seconds is not None:
            values.duration.observe(seconds)

    def _failed(self, run: RunRecord, event: Event) -> None:
        values = self._run(run)
        (
            values.interrupted
            if event.data.get("status") == RunStatus.INTERRUPTED
            else values.failed
        ).inc()

    def _step(self, run: RunRecord, event: Event) -> None:
        milliseconds = event.data.get("duration_ms")
        if not isinstance(milliseconds, int | float) or milliseconds < 0:
            # (a bool is 0 or 1 ms: harmless)
            return
        key = (run.flow, run.version, event.step)
        buckets = self._step_values.get(key)
        if buckets is None:
            flow, _version = self._flow(run.flow, run.version)
            step = event.step or ""
            if flow == OTHER or not self._steps((flow, step)):
                step = OTHER
            buckets = _cached(self._step_values, key, self.step_duration.histogram(flow, step))
        buckets.observe(milliseconds / 1000)

    def _model_call(self, run: RunRecord, event: Event) -> None:
        data = event.data
        key = (run.flow, run.version, data.get("provider"), data.get("model"))
        values = self._model_values.get(key)
        if values is None:
            flow, _version = self._flow(run.flow, run.version)
            provider, model = str(key[2] or ""), str(key[3] or "")
            if not self._models((provider, model)):
                provider = model = OTHER
            values = _cached(self._model_values, key, _ModelValues(self, flow, provider, model))
        (values.ok if data.get("ok", True) else values.error).inc()
        seconds = _seconds(data.get("latency_ms"))
        if seconds is not None:
            values.latency.observe(seconds)
        for name, count in values.tokens:
            tokens = data.get(name)
            if isinstance(tokens, int) and tokens > 0:
                count.inc(tokens)
        cost = data.get("cost_usd")
        if isinstance(cost, float | int):
            if cost > 0:
                values.cost.inc(cost)
        else:
            values.unpriced.inc()

    # ---- the rest -----------------------------------------------------------------------------

    def took_over(self, kind: str) -> None:
        """A run of a dead replica taken over: `running` (resumed) or `queued` (started)."""
        self.taken_over.count(kind).inc()

    def snapshot(self, *, queued: int, running: int, waiting: Mapping[str, int]) -> None:
        """The gauges' values for the scrape that asks now."""
        self.gauges.queued, self.gauges.running = queued, running
        shown: dict[str, int] = {}
        for flow, count in waiting.items():
            label = flow if self._flows(flow) else OTHER
            shown[label] = shown.get(label, 0) + count
        self.gauges.waiting = shown

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes (version 0.0.4), with every event told so far counted."""
        later.flush()
        return generate_latest(self.registry)


class _RunValues:
    """What the events of one flow version add to (each series shown from its first run on, at 0)."""

    def __init__(self, metrics: Metrics, flow: str, version: str) -> None:
        self.started = metrics.runs_started.count(flow, version)
        self.resumed = metrics.runs_resumed.count(flow, version)
        self.finished = metrics.runs_finished.count(flow, version)
        self.failed = metrics.runs_failed.count(flow, version)
        self.interrupted = metrics.runs_interrupted.count(flow, version)
        self.duration = metrics.run_duration.histogram(flow, version)


class _ModelValues:
    """What one model's calls in one flow add to."""

    def __init__(self, metrics: Metrics, flow: str, provider: str, model: str) -> None:
        self.ok = metrics.model_calls.count(flow, provider, model, "ok")
        self.error = metrics.model_calls.count(flow, provider, model, "error")
        self.latency = metrics.model_latency.histogram(flow, provider, model)
        self.tokens = [
            (key, metrics.tokens.count(flow, provider, model, kind))
            for key, kind in TOKEN_KINDS.items()
        ]
        self.cost = metrics.cost.count(flow, provider, model)
        self.unpriced = metrics.unpriced.count(flow, provider, model)


def _cached(cache: dict[Any, T], key: Any, value: T) -> T:
    if len(cache) >= CACHED:
        cache.clear()
    cache[key] = value
    return value


def _seconds(milliseconds: Any) -> float | None:
    if isinstance(milliseconds, int | float) and milliseconds >= 0:
        return float(milliseconds) / 1000
    return None
