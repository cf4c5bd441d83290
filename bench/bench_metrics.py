"""What the Prometheus metrics of `blockyard serve` cost a run: the metrics observer
(engine/serve/metrics.py) on against off, on the durable chain50 and on a five-model-call flow (the
mock model, no delay), runs one at a time. The issue's bound: at most 3% against off.

The runs go through the same Engine the server uses, in-process (`Yard.arun`), the observer toggled
between samples on one yard and one state database (`Engine.observers`): through HTTP the server's
own work per run would only add to the denominator. With an observer the runtime hands each event to
the execution's teller, which tells the observers in batches (engine/runtime/observe.py): its cost is
counted here too, and measured alone at the end.

Two measurements, each interleaved (on, off, off, on, ...), of the process's CPU time per run (what
other work on a shared machine disturbs least) and its wall time; then the observer alone: the events
of one run of each flow replayed into it, to give its cost per run in microseconds.

    python bench/bench_metrics.py          # BENCH_ROUNDS=9 rounds of BENCH_RUNS=10 runs each
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import header, make_yard, measure, median, rounds, run, table

from engine import Yard
from engine.core.events import Event
from engine.runtime.execution import Execution
from engine.runtime.observe import teller
from engine.serve.metrics import Metrics
from engine.state.store import RunRecord

RUNS_PER_SAMPLE = int(os.environ.get("BENCH_RUNS", 10))
REPLAYS = 2000

FILES = {
    "blockyard.yaml": "models:\n  default: {provider: mock}\n",
    "blocks/inc.yaml": """
        block: inc
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {n: {type: integer}}
        compute: {n: "n + 1"}
    """,
    "blocks/echo.yaml": """
        block: echo
        kind: llm
        inputs: {text: {type: string}}
        outputs: {text: {type: string}}
        prompt: {user: "Repeat: {{ text }}"}
    """,
    "flows/chain50.yaml": "flow: chain50\ninputs: {n: {type: integer}}\noutputs: [n]\nsteps:\n"
    + "\n".join(
        ['  - {id: s0, uses: inc, with: {n: "{{ inputs.n }}"}}']
        + [f"  - {{id: s{i}, uses: inc}}" for i in range(1, 50)]
    )
    + "\n",
    "flows/five.yaml": "flow: five\noutputs: [text]\nsteps:\n"
    + "\n".join(f'  - {{id: m{i}, uses: echo, with: {{text: "step {i}"}}}}' for i in range(5))
    + "\n",
}
WORKLOADS = {"chain50": {"n": 0}, "five": {}}


async def main() -> None:
    root = make_yard(FILES)
    count = rounds(9)
    with Yard.load(root) as yard:
        metrics = Metrics()
        observers = yard.engine.observers
        if observers:
            raise SystemExit(
                "this yard exports telemetry (OTEL_* or `telemetry:`): unset it to measure metrics alone"
            )

        walls: dict[str, list[float]] = {}

        def variant(flow: str, on: bool):  # type: ignore[no-untyped-def]
            async def sample() -> float:
                observers[:] = [metrics.observe] if on else []
                began, cpu = time.perf_counter(), time.process_time()
                for _ in range(RUNS_PER_SAMPLE):
                    result = await yard.arun(flow, WORKLOADS[flow])
                    assert result.status == "finished", result
                walls.setdefault(f"{flow} {'on' if on else 'off'}", []).append(
                    (time.perf_counter() - began) / RUNS_PER_SAMPLE
                )
                return (
                    time.process_time() - cpu
                ) / RUNS_PER_SAMPLE  # the process's CPU: all its threads

            return sample

        header(
            f"metrics observer on vs off ({RUNS_PER_SAMPLE} runs per sample, {count} rounds, durability sync)"
        )
        for attempt in (1, 2):
            walls.clear()
            samples = {}
            # each flow's variants interleaved among themselves: a sample right after
            for flow in WORKLOADS:
                # the other flow's runs slower, and whichever variant sat there would look dearer
                samples.update(
                    await measure(
                        {
                            f"{flow} {state}": variant(flow, state == "on")
                            for state in ("off", "on")
                        },
                        count,
                    )
                )
            rows = []
            for flow in WORKLOADS:
                off, on = median(samples[f"{flow} off"]), median(samples[f"{flow} on"])
                wall_off, wall_on = median(walls[f"{flow} off"]), median(walls[f"{flow} on"])
                rows.append(
                    [
                        flow,
                        f"{off * 1000:.2f} ms",
                        f"{on * 1000:.2f} ms",
                        f"{on / off:.3f}x",
                        f"{wall_off * 1000:.2f} ms",
                        f"{wall_on * 1000:.2f} ms",
                        f"{wall_on / wall_off:.3f}x",
                    ]
                )
            print(f"measurement {attempt}\n")
            print(
                table(
                    ["flow", "CPU off", "CPU on", "on / off", "wall off", "wall on", "on / off"],
                    rows,
                )
            )
            print()
        observers[:] = []

        # the observer alone: one run's events of each flow, told to it REPLAYS times
        captured: dict[str, list[tuple[RunRecord, Event, Execution]]] = {
            flow: [] for flow in WORKLOADS
        }
        for flow in WORKLOADS:

            def keep(
                record: RunRecord, event: Event, execution: Execution, into: str = flow
            ) -> None:
                captured[into].append((record, event, execution))

            observers[:] = [keep]
            await yard.arun(flow, WORKLOADS[flow])
        observers[:] = []
        rows = []
        for flow, told in captured.items():
            alone = Metrics()
            began = time.perf_counter()
            for _ in range(REPLAYS):
                for record, event, execution in told:
                    alone.observe(record, event, execution)
            per_run = (time.perf_counter() - began) / REPLAYS
            rows.append(
                [
                    flow,
                    str(len(told)),
                    f"{per_run * 1e6:.1f} µs",
                    f"{per_run / len(told) * 1e6:.2f} µs",
                ]
            )
        print("the observer alone, per run of each flow\n")
        print(table(["flow", "events", "per run", "per event"], rows))
        print()

        # what handing the events to a teller costs, with an observer that does nothing (engine/runtime/observe.py)
        rows = []
        for flow, told in captured.items():
            events = [event for _record, event, _execution in told]
            per_run = await _handing(events, told[0][0])
            rows.append([flow, str(len(events)), f"{per_run * 1e6:.1f} µs"])
        print("the runtime's teller (a no-op observer, told in batches), per run of each flow\n")
        print(table(["flow", "events", "its cost"], rows))


def _nothing(run: RunRecord, event: Event, execution: object) -> None:
    return None


async def _handing(events: list[Event], record: RunRecord) -> float:
    """Seconds per run of handing `events` to a new execution's teller, as the runtime does."""
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(REPLAYS // 4):
            tell = teller((_nothing,), record, None)
            assert tell is not None
            for event in events:
                tell(event)
        best = min(best, (time.perf_counter() - began) / (REPLAYS // 4))
    return best


if __name__ == "__main__":
    run(main)
