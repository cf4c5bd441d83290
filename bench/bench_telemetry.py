"""OpenTelemetry tracing (and Prometheus metrics) on vs off: the per-run time of durable runs with and
without their spans exported.

Tracing on is the real pipeline (engine/telemetry): every event told to the observer, each span encoded
as it ends, batched by the sending thread and posted as OTLP/HTTP protobuf to a local receiver
(tests/support/otlp_sink.py, in a process of its own) that accepts and discards them, so the exporter
really encodes and sends. "trace+metrics" adds the observer of `blockyard serve`'s Prometheus metrics
(engine/serve/metrics.py; bench/bench_metrics.py measures it alone). Off is the same yard and database
with no observer. Variants alternate, interleaved rounds (bench/_harness.py); all run on the one state
database, one run at a time.

Workloads:
  chain50   50 transform steps in a row (bench/bench_overhead.py): 51 spans a run, the most per unit of work
  five      five llm steps in a row on the offline mock model: 11 spans a run, with their tokens; the model
            calls cost nearly nothing, so the spans' share is the largest of any flow of model calls
  five_api  the same five steps through the real OpenAI client (langchain-openai) to a loopback
            OpenAI-compatible server in a process of its own (tests/support/usage_llm.py) that answers at
            once and reports usage: what a flow of five model calls costs its process in production, less
            the model's own time

The garbage collector (BENCH_GC), set once everything is loaded, the same for every variant:
  serve     as `blockyard serve` runs (engine/cli/startup.py): one collection, what is loaded frozen,
            young collections every 20,000 allocations (the default)
  cli       as the other `blockyard` commands run: what is loaded frozen, Python's thresholds
  default   Python's defaults, nothing frozen: the Python API (`Yard`) in a program that sets nothing

    python bench/bench_telemetry.py                    # BENCH_ROUNDS=9, BENCH_RUNS=20, BENCH_GC=serve
    BENCH_GC=default python bench/bench_telemetry.py

CPU time of the process (every thread) is the figure to read on a busy machine; wall time is shown too.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import header, make_yard, measure, median, rounds, run, table
from bench_overhead import BLOCKS, flows

from engine import Yard
from engine.cli.startup import SERVER_THRESHOLDS
from engine.core import later
from engine.runtime.observe import _Teller
from engine.serve.metrics import Metrics
from engine.telemetry import Telemetry, exporter, wire
from engine.telemetry.exporter import OtlpHttpExporter, Pipeline
from engine.telemetry.settings import Batching, Settings

REPO = Path(__file__).resolve().parents[1]
RUNS_PER_SAMPLE = int(os.environ.get("BENCH_RUNS", 20))
GC_MODE = os.environ.get("BENCH_GC", "serve")
SAY = """
block: say
kind: llm
inputs: {topic: {type: string}}
outputs: {text: {type: string}}
prompt: {system: You answer in one sentence., user: "Tell me about {{ topic }}."}
"""
SAY_API = SAY.replace("block: say", "block: say_api") + "model: loopback\n"


def _five(flow: str, block: str) -> str:
    return (
        f"flow: {flow}\ninputs: {{topic: {{type: string, default: bees}}}}\noutputs: [text]\nsteps:\n"
        + "".join(
            f'  - {{id: s{i}, uses: {block}, with: {{topic: "{{{{ inputs.topic }}}} {i}"}}}}\n'
            for i in range(5)
        )
    )


WORKLOADS: dict[str, dict[str, Any]] = {"chain50": {"n": 0}, "five": {}, "five_api": {}}
STATES = ("off", "no-op", "trace", "trace+metrics")
TOLD = STATES[2:]  # the variants whose observers do something


def _set_gc(mode: str) -> str:
    """The collector as the product's commands set it (engine/cli/startup.py), after everything is loaded."""
    if mode == "serve":
        gc.collect()
        gc.set_threshold(*SERVER_THRESHOLDS)
        gc.freeze()
        return f"as `blockyard serve`: loaded heap frozen, thresholds {SERVER_THRESHOLDS}"
    if mode == "cli":
        gc.freeze()
        return f"as the other `blockyard` commands: loaded heap frozen, thresholds {gc.get_threshold()}"
    if mode == "default":
        return f"Python's defaults: nothing frozen, thresholds {gc.get_threshold()}"
    raise SystemExit(f"BENCH_GC={mode!r}: serve, cli or default")


def _serve(module: str) -> tuple[subprocess.Popen[str], int]:
    """A loopback server of the tests' (`python -m module`), in a process of its own, and its port."""
    process = subprocess.Popen(
        [sys.executable, "-m", module], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


async def main() -> None:
    for name in [key for key in os.environ if key.startswith("OTEL_")]:
        del os.environ[name]  # the yard's own telemetry stays off: the variants attach theirs
    sink, port = _serve("tests.support.otlp_sink")
    llm, llm_port = _serve("tests.support.usage_llm")
    chain = {name: text for name, text in flows().items() if name == "flows/chain50.yaml"}
    root = make_yard(
        {
            **BLOCKS,
            **chain,
            "blockyard.yaml": "models:\n  loopback: {provider: openai, name: usage-model, "
            f"base_url: 'http://127.0.0.1:{llm_port}/v1'}}\n",
            "blocks/say.yaml": SAY,
            "blocks/say_api.yaml": SAY_API,
            "flows/five.yaml": _five("five", "say"),
            "flows/five_api.yaml": _five("five_api", "say_api"),
        }
    )
    # the observer the Python API and the server attach (engine/telemetry/__init__.py); its pipeline, which the
    # first traced execution makes, made now (the SDK's imports are no run's)
    settings = Settings(endpoint=f"http://127.0.0.1:{port}/v1/traces")
    telemetry = Telemetry(settings)
    pipeline = exporter.pipeline(settings, telemetry.observer)
    metrics = Metrics()
    yard = Yard.load(root)
    # no-op: one observer that does nothing: what handing events to observers costs, and the noise floor
    observers: dict[str, list[Any]] = {
        "off": [],
        "no-op": [_nothing],
        "trace": [telemetry.observer],
        "trace+metrics": [telemetry.observer, metrics.observe],
    }
    wall: dict[str, list[float]] = {}
    collections: dict[
        str, list[int]
    ] = {}  # young (and older) collections per variant, counted by gc.callbacks
    current = [""]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and current[0]:
            collections.setdefault(current[0], [0, 0, 0])[info["generation"]] += 1

    variants: dict[str, dict[str, Callable[[], Any]]] = {}
    for name, inputs in WORKLOADS.items():
        for state in STATES:
            key = f"{name} {state}"

            async def sample(
                name: str = name,
                inputs: dict[str, Any] = inputs,
                state: str = state,
                key: str = key,
            ) -> float:
                yard.engine.observers[:] = observers[state]
                current[0] = key
                began, cpu = time.perf_counter(), time.process_time()
                for _ in range(RUNS_PER_SAMPLE):
                    result = await yard.arun(name, inputs)
                    assert result.ok, result.error
                wall.setdefault(key, []).append((time.perf_counter() - began) / RUNS_PER_SAMPLE)
                # the process's CPU, all its threads: the sending thread's bodies and posts included
                spent = (time.process_time() - cpu) / RUNS_PER_SAMPLE
                current[0] = ""
                return spent

            variants.setdefault(name, {})[key] = sample
    for name, inputs in WORKLOADS.items():  # compiled, cached, warm before the collector's settings
        assert (await yard.arun(name, inputs)).ok
    said = _set_gc(GC_MODE)
    gc.callbacks.append(count)
    samples: dict[str, list[float]] = {}
    # each workload's variants interleaved among themselves: a sample right after the
    for name in WORKLOADS:
        # other workload's is slower, and whichever variant sat there would look dearer
        samples.update(await measure(variants[name], rounds(9)))
    gc.callbacks.remove(count)
    load = os.getloadavg()
    assert pipeline.batch is not None
    in_run = {
        name: await _in_run(yard, name, inputs, observers, pipeline)
        for name, inputs in WORKLOADS.items()
    }
    parts = {name: await _parts(yard, name, inputs, port) for name, inputs in WORKLOADS.items()}
    pipeline.flush(30)
    sent = pipeline.exporter.sent  # type: ignore[attr-defined]
    pipeline.shutdown()
    yard.close()
    for process in (sink, llm):
        process.terminate()
        process.wait(timeout=10)
    header(
        f"tracing (and metrics) on vs off, per durable run ({RUNS_PER_SAMPLE} runs per sample, {rounds(9)} "
        "rounds; spans posted to a local OTLP/HTTP receiver)"
    )
    print(
        f"garbage collector: {said}; load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    rows = []
    total_runs = RUNS_PER_SAMPLE * (rounds(9) + 1)
    for name in WORKLOADS:
        off, wall_off = samples[f"{name} off"], wall[f"{name} off"]
        for state in STATES:
            key = f"{name} {state}"
            cpu, took = samples[key], wall[key]
            young = collections.get(key, [0, 0, 0])
            rows.append(
                [
                    name,
                    state,
                    f"{median(cpu) * 1000:.2f} ms",
                    f"{median(cpu) / median(off):.3f}×",
                    f"{_paired(cpu, off):.3f}×",
                    f"{median(took) * 1000:.2f} ms",
                    f"{median(took) / median(wall_off):.3f}×",
                    f"{_paired(took, wall_off):.3f}×",
                    f"{young[0] / total_runs:.2f} / {young[1] / total_runs:.3f} / {young[2] / total_runs:.3f}",
                ]
            )
    print(
        table(
            [
                "workload",
                "variant",
                "CPU",
                "CPU / off",
                "paired",
                "wall",
                "wall / off",
                "paired",
                "collections a run (gen 0/1/2)",
            ],
            rows,
        )
    )
    print(
        "\n(/ off: the ratio of the medians; paired: the median of each round's ratio to the round's off sample)"
    )
    print(f"\n{sent} spans accepted by the receiver")
    _print_direct(in_run, parts, samples)


def _print_direct(
    in_run: dict[str, dict[str, tuple[float, float]]],
    parts: dict[str, tuple[float, float, float, int]],
    samples: dict[str, list[float]],
) -> None:
    """The observers' cost measured directly: in their runs, and their parts replayed alone."""
    print(
        f"\nIn their runs ({IN_RUN} runs, {IN_RUN_ROUNDS} rounds, medians): the observers' own CPU, measured on the "
        "run's thread around each batch of events they are told (less the same around an observer that does "
        "nothing), plus the CPU of the thread that tells those that may lag (engine/core/later.py), and the "
        "sending thread's CPU (bodies, posts), per run:\n"
    )
    rows = []
    for name, measured in in_run.items():
        off = median(samples[f"{name} off"])
        for state in TOLD:
            observer, sender = measured[state]
            rows.append(
                [
                    name,
                    state,
                    f"{observer * 1e6:.0f} µs",
                    f"{sender * 1e6:.0f} µs",
                    f"{(observer + sender) * 1e6:.0f} µs",
                    f"{(observer + sender) / off * 100:.1f}%",
                ]
            )
    print(
        table(
            ["workload", "variant", "observers", "sending thread", "total", "of a run's CPU off"],
            rows,
        )
    )
    print(
        "\nThe parts, measured alone (one run's events replayed; the fastest of 300 repetitions, so a busy machine "
        "moves them less):\n"
    )
    rows = []
    for name, (observe, body, post, spans) in parts.items():
        total = observe + body + post
        rows.append(
            [
                name,
                str(spans),
                f"{observe * 1e6:.0f} µs",
                f"{body * 1e6:.1f} µs",
                f"{post * 1e6:.1f} µs",
                f"{total * 1e6:.0f} µs",
                f"{total / median(samples[f'{name} off']) * 100:.1f}%",
            ]
        )
    print(
        table(
            [
                "workload",
                "spans",
                "observer (spans encoded)",
                "body",
                "posting",
                "total",
                "of a run's CPU off",
            ],
            rows,
        )
    )


IN_RUN = int(os.environ.get("BENCH_IN_RUN", 40))
IN_RUN_ROUNDS = 5


async def _in_run(
    yard: Yard,
    name: str,
    inputs: dict[str, Any],
    observers: dict[str, list[Any]],
    pipeline: Pipeline,
) -> dict[str, tuple[float, float]]:
    """Per variant: CPU seconds per run of its observers, measured on the run's thread around each batch of
    events they are told (engine/runtime/observe.py, `_Teller.tell`) plus the CPU of the thread that tells
    those that may lag (engine/core/later.py) and of a flush of what it had not told yet, and of the
    sending thread. Around each
    batch, not each event: the clock is a system call (a microsecond), and one around every event of a
    run would cost, and disturb, more than what it measures."""
    clock = time.thread_time_ns
    assert pipeline.batch is not None and pipeline.batch.thread.ident is not None
    sender_clock = time.pthread_getcpuclockid(pipeline.batch.thread.ident)
    # the observers that may lag (traces, metrics) are told on engine/core/later.py's thread: its CPU is theirs
    teller = later.thread()
    assert teller is not None and teller.ident is not None
    later_clock = time.pthread_getcpuclockid(teller.ident)
    spent: dict[str, list[float]] = {}
    sent: dict[str, list[float]] = {}
    total = [0]
    told = _Teller.tell

    def timed(teller: _Teller) -> None:
        began = clock()
        told(teller)
        total[0] += clock() - began

    _Teller.tell = timed  # type: ignore[method-assign,assignment]
    try:
        for _ in range(IN_RUN_ROUNDS):
            for state in ("no-op", *TOLD):
                # no-op: one observer that does nothing, so that what the clock and the batching cost is
                # taken away
                yard.engine.observers[:] = observers[state]
                pipeline.flush()  # nothing of the round before left to do
                total[0] = 0
                before = time.clock_gettime_ns(sender_clock)
                told_before = time.clock_gettime_ns(later_clock)
                for _ in range(IN_RUN):
                    assert (await yard.arun(name, inputs)).ok
                # what the thread of engine/core/later.py has not told yet, told here, counted here
                began = clock()
                later.flush()
                total[0] += clock() - began
                total[0] += time.clock_gettime_ns(later_clock) - told_before
                pipeline.flush()  # the spans of these runs posted now, counted here
                spent.setdefault(state, []).append(total[0] / IN_RUN / 1e9)
                sent.setdefault(state, []).append(
                    (time.clock_gettime_ns(sender_clock) - before) / IN_RUN / 1e9
                )
    finally:
        _Teller.tell = told  # type: ignore[method-assign]
    yard.engine.observers[:] = []
    timing = median(spent["no-op"])
    return {state: (median(spent[state]) - timing, median(sent[state])) for state in TOLD}


def _nothing(run: Any, event: Any, execution: Any) -> None:
    return None


def _paired(on: list[float], off: list[float]) -> float:
    """The median of the per-round ratios: each round's samples ran back to back, so drift cancels."""
    return median([a / b for a, b in zip(on, off, strict=True)])


class _Null:
    """An exporter that takes every body and does nothing with it."""

    def export(self, body: bytes, count: int) -> bool:
        return True


def _fastest(fn: Callable[[], object], count: int = 300) -> float:
    times = []
    for _ in range(count):
        began = time.process_time()
        fn()
        times.append(time.process_time() - began)
    return min(times)


async def _parts(
    yard: Yard, name: str, inputs: dict[str, Any], port: int
) -> tuple[float, float, float, int]:
    """CPU seconds per run of the observer (the events made spans, each encoded and queued), of making
    a body of them, and of posting it (a body of ten runs' spans, as batches go); and spans per run."""
    events: list[tuple[Any, Any, Any]] = []
    yard.engine.observers[:] = [
        lambda run, event, execution: events.append((run, event, execution))
    ]
    assert (await yard.arun(name, inputs)).ok
    yard.engine.observers[:] = []
    replay = Pipeline(Settings(endpoint="http://127.0.0.1:9/v1/traces"), _Null(), batch=False)
    spans: list[bytes] = []
    replay.send = spans.extend  # type: ignore[method-assign]  # keep the spans' bytes instead of sending them
    for each in events:
        replay.observer(*each)
    # the real path: spans queued in a batch that never leaves while measured (emptied between repetitions)
    never = Batching(delay=3600.0, max_batch=1 << 30, max_queue=1 << 30)
    observer = Pipeline(Settings(endpoint="http://127.0.0.1:9/v1/traces", batching=never), _Null())
    assert observer.batch is not None
    queue = observer.batch.queue

    # each replay is a new execution's trace: the last event ended the one before
    def observe() -> None:
        for each in events:
            observer.observer(*each)
        queue.clear()

    observe_cpu = _fastest(observe)
    body_cpu = _fastest(lambda: wire.request(replay.resource, replay.scope, spans))
    exporter = OtlpHttpExporter(Settings(endpoint=f"http://127.0.0.1:{port}/v1/traces"))
    body = wire.request(replay.resource, replay.scope, spans * 10)
    post_cpu = _fastest(lambda: exporter._post(body, 10)) / 10
    observer.shutdown(1)
    return observe_cpu, body_cpu, post_cpu, len(spans)


if __name__ == "__main__":
    run(main)
