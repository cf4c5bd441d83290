"""Blockyard's per-step cost as ratios to raw LangGraph, in one interleaved run (issue 15's table).

For each workload of bench_overhead.py (chain50, map200, loop50, router10: every step computes one
integer, no model) it measures, round-robin in one process:

  raw            hand-written LangGraph, sync nodes, `invoke`, no checkpointer  (the baseline: 1.00)
  raw+sqlite     the same graph on LangGraph's SqliteSaver (a file), durability="sync":
                 what a developer writes for durability
  blockyard sync   `Yard.arun`, durability sync (the default: runs row, trace, output checks, a checkpoint
                   committed after every step before the next)
  blockyard async  the same, durability async (checkpoint writes overlap the next step)
  blockyard exit   the same, durability exit (one checkpoint, when the run ends)
  blockyard none   the same, durability none (no checkpointer; runs row and trace still recorded)
  blockyard/jinja  durability sync with the template fast path off: every expression rendered through Jinja

and prints each per-run median and its ratio to `raw`. A second table times one expression
(`n + 1`) on the fast path and through Jinja. A third is the cold start: the CPU time (user + sys
of the child process) of a fresh `blockyard run hello` on the mock against bench/raw_hello.py (the
same flow written by hand in LangGraph, durable on SqliteSaver), interleaved, and the first
compile of a 200-step flow in a fresh process after its imports (bench/bench_compile.py --first).

    python bench/compare.py               # BENCH_ROUNDS=7 by default; --rounds N overrides
    python bench/compare.py --rounds 3    # a quick smoke run (provisional figures)
    python bench/compare.py --only cold --rounds 15   # the cold-start table alone

The machine the figures in docs come from is a shared 2-core VM: only ratios from one run are
comparable, and even those move by 10-20 % between runs.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fresh_db, header, make_yard, measure, median, rounds, run, table
from bench_overhead import BLOCKS, WORKLOADS, flows

from engine import Yard
from engine.templates import evaluate

RUNS_PER_SAMPLE = int(os.environ.get("BENCH_RUNS", 3))
MODES = ("sync", "async", "exit", "none")  # durability modes (docs/runtime.md, "Durability")
BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
KEYS = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY")


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
    samples = await measure(variants, count)
    yard.close()
    saver_cm.__exit__(None, None, None)

    header(f"per-run time as a ratio to raw LangGraph without a checkpointer ({RUNS_PER_SAMPLE} runs per sample)")
    kinds = ["raw", "raw+sqlite", *(f"blockyard {mode}" for mode in MODES), "blockyard/jinja"]
    rows = []
    for name in WORKLOADS:
        times = {kind: median(samples[f"{name} {kind}"]) for kind in kinds}
        base = times["raw"]
        rows.append([name, *(f"{times[kind] * 1000:.1f} ms ({times[kind] / base:.2f}x)" for kind in kinds),
                     f"{times['blockyard sync'] / times['raw+sqlite']:.2f}x"])
    print(table(["workload", "raw, no checkpointer", "raw + SqliteSaver (sync)",
                 *(f"blockyard {mode}" for mode in MODES), "blockyard sync, Jinja only", "blockyard sync / raw+sqlite"],
                rows))
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


def child_cpu(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds (user + sys) of one child process, and its output; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


async def cold_start(count: int) -> None:
    """Fresh processes, interleaved: `blockyard run hello` on the mock (the example yard, no API key:
    the default profile is the mock), the hand-written script with and without a chat model, a bare
    `python -c pass`, and the first compile of a 200-step flow after the imports."""
    root = Path(make_yard({}))
    for folder in ("blocks", "flows", "prompts", "schemas"):
        shutil.rmtree(root / folder, ignore_errors=True)
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "blockyard.yaml", root / "blockyard.yaml")
    env = {key: value for key, value in os.environ.items() if key not in (*KEYS, "PYTHONDONTWRITEBYTECODE")}
    # bytecode as an installed package has it (the warm-up round writes it), in a folder of its own: with
    # PYTHONDONTWRITEBYTECODE the engine's modules would be compiled from source in every process
    env["PYTHONPATH"], env["PYTHONPYCACHEPREFIX"] = str(REPO), str(root / "pycache")
    raw_state = fresh_db(root / "raw", "hello.sqlite")
    python = sys.executable
    argvs = {
        "blockyard run hello": [python, "-m", "engine", "run", "hello"],
        "raw LangGraph script": [python, str(BENCH / "raw_hello.py"), str(raw_state)],
        "raw script, no chat model": [python, str(BENCH / "raw_hello.py"), str(raw_state), "--no-model"],
        "python -c pass": [python, "-c", "pass"],
    }
    outputs: dict[str, str] = {}

    def variant(argv: list[str], name: str) -> Any:
        async def sample() -> float:
            took, outputs[name] = child_cpu(argv, root, env)
            return took
        return sample

    firsts: list[dict[str, float]] = []

    async def first_compile() -> float:
        took, out = child_cpu([python, str(BENCH / "bench_compile.py"), "--first"], root, env)
        firsts.append(json.loads(out))
        return took

    variants = {name: variant(argv, name) for name, argv in argvs.items()}
    variants["first compile"] = first_compile
    samples = await measure(variants, count)  # the warm-up run creates the state databases and the bytecode
    assert "loud: 'GREET: NAME=WORLD'" in outputs["blockyard run hello"], outputs["blockyard run hello"]
    assert "loud: 'GREET: NAME=WORLD'" in outputs["raw LangGraph script"], outputs["raw LangGraph script"]
    firsts = firsts[1:]  # the warm-up's

    header(f"cold start: CPU time (user + sys) of a fresh process, medians of {count} interleaved rounds")
    base = samples["raw LangGraph script"]
    rows = []
    for name in argvs:
        ratio = median([value / raw for value, raw in zip(samples[name], base, strict=True)])
        rows.append([name, f"{median(samples[name]) * 1000:.0f} ms", f"{ratio:.2f}x"])
    print(table(["process", "CPU", "per-round ratio to the raw script"], rows))
    imports = median([f["imports_ms"] for f in firsts])
    chain, mixed = median([f["chain_ms"] for f in firsts]), median([f["mixed_ms"] for f in firsts])
    print(f"\nfirst compile of a 200-step flow in a fresh process, after its imports ({imports:.0f} ms), CPU: "
          f"chain {chain:.1f} ms, mixed (routers, loop, map) {mixed:.1f} ms (bench/bench_compile.py --first)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds(7), help="interleaved rounds per variant")
    parser.add_argument("--only", choices=["steps", "expressions", "cold"], help="one table only")
    args = parser.parse_args()
    if args.only in (None, "steps"):
        await per_step(args.rounds)
    if args.only in (None, "expressions"):
        await expressions(args.rounds)
    if args.only in (None, "cold"):
        await cold_start(args.rounds)


if __name__ == "__main__":
    run(main)
