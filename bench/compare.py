"""Blockyard's per-step cost as ratios to raw LangGraph, in one interleaved run (issue 15's table).

For each workload of bench_overhead.py (chain50, map200, loop50, router10: every step computes one
integer, no model) it measures, round-robin in one process:

  raw            hand-written LangGraph, sync nodes, `invoke`, no checkpointer  (the baseline: 1.00)
  raw+sqlite     the same graph on LangGraph's SqliteSaver (a file), durability="sync":
                 what a developer writes for durability
  blockyard sync   `Yard.arun`, durability sync (the default: runs row, trace, output checks, a checkpoint
                   committed after every step before the next; one run at a time, so on the run's own
                   thread: engine/state/writer.py, `write`)
  blockyard async  the same, durability async (checkpoint writes overlap the next step)
  blockyard exit   the same, durability exit (one checkpoint, when the run ends)
  blockyard none   the same, durability none (no checkpointer; runs row and trace still recorded)
  blockyard/jinja  durability sync with the template fast path off: every expression rendered through Jinja

and prints each per-run median and its ratio to `raw`, in CPU time of the process (writer thread
included: what a loaded machine distorts least) and in wall time. A second table times one expression
(`n + 1`) on the fast path and through Jinja.

    python bench/compare.py               # BENCH_ROUNDS=7 by default; --rounds N overrides
    python bench/compare.py --rounds 3    # a quick smoke run (provisional figures)

The machine the figures in docs come from is a shared 2-core VM: only ratios from one run are
comparable, and even those move by 10-20 % between runs (more under load: prefer the CPU-time
table). Figures: docs/runtime.md, Performance ("Durability modes").
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import header, make_yard, measure, median, rounds, run, table
from bench_overhead import BLOCKS, WORKLOADS, flows

from engine import Yard
from engine.templates import evaluate

RUNS_PER_SAMPLE = int(os.environ.get("BENCH_RUNS", 3))
MODES = ("sync", "async", "exit", "none")  # durability modes (docs/runtime.md, "Durability")


@contextmanager
def jinja_only() -> Iterator[None]:
    """Every `evaluate` in the process renders through Jinja (its callers import it by name: the
    function's keyword default is what they share)."""
    defaults = evaluate.__kwdefaults__
    evaluate.__kwdefaults__ = {"fast": False}
    try:
        yield
    finally:
        evaluate.__kwdefaults__ = defaults


async def per_step(count: int) -> None:
    root = make_yard({**BLOCKS, **flows()})
    shutil.rmtree(root / ".blockyard", ignore_errors=True)
    yard = Yard.load(root)
    saver_cm = SqliteSaver.from_conn_string(str(root / "raw.sqlite"))
    saver = saver_cm.__enter__()
    counter = iter(range(10**9))
    variants: dict[str, Any] = {}
    cpu: dict[str, list[float]] = {}

    def cpu_timed(name: str, sample: Callable[[], Any]) -> Callable[[], Any]:
        async def timed() -> float:
            began = time.process_time()
            took: float = await sample()
            cpu.setdefault(name, []).append((time.process_time() - began) / RUNS_PER_SAMPLE)
            return took
        return timed

    for name, (make_graph, inputs, _answer) in WORKLOADS.items():
        bare = make_graph(sync=True).compile()
        durable = make_graph(sync=True).compile(checkpointer=saver)

        async def raw(app: Any = bare, inputs: dict[str, Any] = inputs) -> float:
            began = time.perf_counter()
            for _ in range(RUNS_PER_SAMPLE):
                app.invoke(dict(inputs), {"recursion_limit": 10_000})
            return (time.perf_counter() - began) / RUNS_PER_SAMPLE

        async def raw_sqlite(app: Any = durable, inputs: dict[str, Any] = inputs) -> float:
            began = time.perf_counter()
            for _ in range(RUNS_PER_SAMPLE):
                config = {"configurable": {"thread_id": f"raw-{next(counter)}"}, "recursion_limit": 10_000}
                app.invoke(dict(inputs), config, durability="sync")
            return (time.perf_counter() - began) / RUNS_PER_SAMPLE

        async def blockyard(inputs: dict[str, Any] = inputs, name: str = name, mode: str = "sync") -> float:
            began = time.perf_counter()
            for _ in range(RUNS_PER_SAMPLE):
                result = await yard.arun(name, inputs, durability=mode)
                assert result.status == "finished", result.error
            return (time.perf_counter() - began) / RUNS_PER_SAMPLE

        async def blockyard_jinja(sample: Callable[[], Any] = blockyard) -> float:  # durability sync
            with jinja_only():
                took: float = await sample()
            return took

        variants[f"{name} raw"] = raw
        variants[f"{name} raw+sqlite"] = raw_sqlite
        for mode in MODES:
            variants[f"{name} blockyard {mode}"] = functools.partial(blockyard, mode=mode)
        variants[f"{name} blockyard/jinja"] = blockyard_jinja
    variants = {name: cpu_timed(name, sample) for name, sample in variants.items()}
    samples = await measure(variants, count)
    cpu = {name: values[-count:] for name, values in cpu.items()}  # the warm-up is not a sample
    yard.close()
    saver_cm.__exit__(None, None, None)

    kinds = ["raw", "raw+sqlite", *(f"blockyard {mode}" for mode in MODES), "blockyard/jinja"]
    for clock, measured in (("CPU time", cpu), ("wall time", samples)):
        header(f"per-run {clock} as a ratio to raw LangGraph without a checkpointer "
               f"({RUNS_PER_SAMPLE} runs per sample)")
        rows = []
        for name in WORKLOADS:
            times = {kind: median(measured[f"{name} {kind}"]) for kind in kinds}
            base = times["raw"]
            rows.append([name, *(f"{times[kind] * 1000:.1f} ms ({times[kind] / base:.2f}x)" for kind in kinds),
                         f"{times['blockyard sync'] / times['raw+sqlite']:.2f}x"])
        print(table(["workload", "raw, no checkpointer", "raw + SqliteSaver (sync)",
                     *(f"blockyard {mode}" for mode in MODES), "blockyard sync, Jinja only",
                     "blockyard sync / raw+sqlite"], rows))
    print("\nblockyard, Jinja only: the same runs with the template fast path off (engine/template_fast.py).")


async def expressions(count: int) -> None:
    cases = {"n + 1": {"n": 1}, "context.verdict == 'pass'": {"context": {"verdict": "pass"}},
             "inputs.a": {"inputs": {"a": 1}}, "context.items[0] * 2 > y": {"context": {"items": [3]}, "y": 1}}
    calls = 2000
    variants: dict[str, Any] = {}
    for source, scope in cases.items():
        for fast in (True, False):
            async def sample(source: str = source, scope: dict[str, Any] = scope, fast: bool = fast) -> float:
                began = time.perf_counter()
                for _ in range(calls):
                    evaluate(source, scope, fast=fast)
                return (time.perf_counter() - began) / calls

            variants[f"{source} {'fast' if fast else 'jinja'}"] = sample
    samples = await measure(variants, count)
    header(f"one expression evaluated ({calls} evaluations per sample)")
    rows = []
    for source in cases:
        fast_t, jinja_t = median(samples[f"{source} fast"]), median(samples[f"{source} jinja"])
        rows.append([f"`{source}`", f"{fast_t * 1e6:.1f} us", f"{jinja_t * 1e6:.1f} us", f"{fast_t / jinja_t:.2f}x"])
    print(table(["expression", "fast path", "Jinja", "fast / Jinja"], rows))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds(7), help="interleaved rounds per variant")
    args = parser.parse_args()
    await per_step(args.rounds)
    await expressions(args.rounds)


if __name__ == "__main__":
    run(main)
