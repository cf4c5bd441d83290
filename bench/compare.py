"""Blockyard's per-step cost as ratios to raw LangGraph, in one interleaved run (issue 15's table).

For each workload of bench_overhead.py (chain50, map200, loop50, router10: every step computes one
integer, no model) it measures, round-robin in one process:

  raw            hand-written LangGraph, sync nodes, `invoke`, no checkpointer  (the baseline: 1.00)
  raw astream    the same graph with async nodes, streamed with `astream` as the engine streams its graph:
                 what LangGraph's async engine costs before any Blockyard code runs (a reference)
  raw+sqlite     the same graph on LangGraph's SqliteSaver (a file), durability="sync", at SQLite's
                 default `synchronous=FULL` (every commit synced: survives a power cut): what a
                 developer writes for durability
  raw+sqlite NORMAL  the same with `PRAGMA synchronous=NORMAL` on the saver's connection (survives a
                 crash of the process, not a power cut): Blockyard's default guarantee
  blockyard sync   `Yard.arun`, durability sync (the default: runs row, trace, output checks, each step's
                   row committed before the next step begins; one run at a time, so on the run's own
                   thread: engine/state/writer.py, `write`), `synchronous: normal` (the default). The
                   steps run inline, one after another in one node (engine/compile/inline.py), and the
                   four workloads' runs in sync, async and none without LangGraph's loop
                   (engine/runtime/direct_runs.py)
  blockyard sync FULL  the same with `synchronous: full` (every commit synced, through the writer's thread)
  blockyard async  the same, durability async (a step's row written while the next step runs)
  blockyard exit   the same, durability exit (LangGraph's loop; one checkpoint, when the run ends)
  blockyard none   the same, durability none (no checkpointer; runs row and trace still recorded)
  blockyard/jinja  durability sync with the template fast path off: every expression rendered through Jinja

and prints each per-run median and its ratio to `raw`, in CPU time of the process (writer thread
included: what a loaded machine distorts least) and in wall time. A second table times one expression
(`n + 1`) on the fast path and through Jinja. A third is the cold start: the CPU time (user + sys
of the child process) of a fresh `blockyard run hello` on the mock against bench/raw_hello.py (the
same flow written by hand in LangGraph, durable on SqliteSaver), interleaved, and the first
compile of a 200-step flow in a fresh process after its imports (bench/bench_compile.py --first).

The last table, the summary, has one row per figure the README's Performance section states
(validate 1,000 files, cold validate, compile 200 steps, one run vs LangGraph + SqliteSaver, 500
concurrent runs, reload latency, HTTP vs in-process, hot reloads under load, thread database size,
8 sub-agents): Blockyard's figure, its raw baseline measured in the same run (or the README's
target where there is none) and the ratio. Its figures come from the other bench scripts, each run
as a subprocess with `--json` at the README's sizes, and from the per-step table above.

    python bench/compare.py               # all tables; BENCH_ROUNDS=7 by default; --rounds N overrides
    python bench/compare.py --quick       # a smoke run: 2 rounds, small sizes (figures mean nothing)
    python bench/compare.py --only cold --rounds 15   # the cold-start table alone
    python bench/compare.py --only summary --markdown # the README figures, as Markdown to paste
    python bench/compare.py --repeat 3 --rounds 15    # the per-step table in 3 fresh processes, each
                                                      # with and without a garbage collection before
                                                      # every sample: every ratio as the range of all
                                                      # six (the worse setting is inside it), then each
                                                      # setting's own (docs/performance.md's figures)
    python bench/compare.py --only summary --repeat 3 # the README's figures from 3 fresh processes,
                                                      # each figure, baseline and ratio as the range
    python bench/compare.py --only cold --repeat 3    # the cold start the same way

The machine the figures in docs come from is a shared 2-core VM: only ratios from one run are
comparable, and even those move by 10-20 % between runs (more under load: prefer the CPU-time
table). Figures: docs/runtime.md, Performance ("Durability modes").
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import platform
import re
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
from _harness import child_env, fresh_db, make_yard, measure, median, rounds, run, table
from _harness import header as plain_header
from bench_overhead import BLOCKS, WORKLOADS, flows

from engine import Yard
from engine.templates.render import evaluate

RUNS_PER_SAMPLE = int(os.environ.get("BENCH_RUNS", 3))
MODES = ("sync", "async", "exit", "none")  # durability modes (docs/runtime.md, "Durability")
BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
KEYS = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
)
JSON = False  # --json: a table's figures as one JSON line (what --repeat reads)
MARKDOWN = False  # --markdown: headings one level down (README's Performance section), no per-table machine line
Figures = dict[str, dict[str, float]]  # per-step medians: workload -> variant -> seconds per run


def header(title: str) -> None:
    if MARKDOWN:
        print(f"\n### {title}\n")
    else:
        plain_header(title)


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


def _cpu_timed(
    cpu: dict[str, list[float]], name: str, sample: Callable[[], Any]
) -> Callable[[], Any]:
    """`sample`, its CPU time per run kept in `cpu[name]` too."""

    async def timed() -> float:
        began = time.process_time()
        took: float = await sample()
        cpu.setdefault(name, []).append((time.process_time() - began) / RUNS_PER_SAMPLE)
        return took

    return timed


async def per_step(
    count: int, show: bool = True, collect: bool = False, as_json: bool = False
) -> Figures:
    """Per-run medians of every workload and variant; the table printed when `show` (as one JSON
    line of ratios when `as_json`: what --repeat reads)."""
    root = make_yard({**BLOCKS, **flows()})
    shutil.rmtree(root / ".blockyard", ignore_errors=True)
    yard = Yard.load(root)
    # the same flows on a database of their own at the other disk guarantee (one yard per database)
    full_root = make_yard({**BLOCKS, **flows()})
    shutil.rmtree(full_root / ".blockyard", ignore_errors=True)
    full_yard = Yard.load(full_root, synchronous="FULL")
    saver_cm = SqliteSaver.from_conn_string(str(root / "raw.sqlite"))
    saver = saver_cm.__enter__()
    normal_cm = SqliteSaver.from_conn_string(str(root / "raw-normal.sqlite"))
    normal_saver = normal_cm.__enter__()
    normal_saver.setup()  # WAL, as the saver sets it, before the guarantee is lowered
    normal_saver.conn.execute("PRAGMA synchronous=NORMAL")
    counter = iter(range(10**9))
    variants: dict[str, Any] = {}
    cpu: dict[str, list[float]] = {}
    for name, (make_graph, inputs, _answer) in WORKLOADS.items():
        bare = make_graph(sync=True).compile()
        async_bare = make_graph(
            sync=False
        ).compile()  # async nodes: what LangGraph's async engine costs alone
        durable = make_graph(sync=True).compile(checkpointer=saver)
        durable_normal = make_graph(sync=True).compile(checkpointer=normal_saver)

        async def raw(app: Any = bare, inputs: dict[str, Any] = inputs) -> float:
            began = time.perf_counter()
            for _ in range(RUNS_PER_SAMPLE):
                app.invoke(dict(inputs), {"recursion_limit": 10_000})
            return (time.perf_counter() - began) / RUNS_PER_SAMPLE

        async def raw_astream(app: Any = async_bare, inputs: dict[str, Any] = inputs) -> float:
            began = time.perf_counter()
            for _ in range(RUNS_PER_SAMPLE):
                async for _chunk in app.astream(
                    dict(inputs), {"recursion_limit": 10_000}, stream_mode="values"
                ):
                    pass
            return (time.perf_counter() - began) / RUNS_PER_SAMPLE

        async def raw_sqlite(app: Any = durable, inputs: dict[str, Any] = inputs) -> float:
            began = time.perf_counter()
            for _ in range(RUNS_PER_SAMPLE):
                config = {
                    "configurable": {"thread_id": f"raw-{next(counter)}"},
                    "recursion_limit": 10_000,
                }
                app.invoke(dict(inputs), config, durability="sync")
            return (time.perf_counter() - began) / RUNS_PER_SAMPLE

        async def blockyard(
            inputs: dict[str, Any] = inputs, name: str = name, mode: str = "sync", on: Yard = yard
        ) -> float:
            began = time.perf_counter()
            for _ in range(RUNS_PER_SAMPLE):
                result = await on.arun(name, inputs, durability=mode)
                assert result.status == "finished", result.error
            return (time.perf_counter() - began) / RUNS_PER_SAMPLE

        async def blockyard_jinja(
            sample: Callable[[], Any] = blockyard,
        ) -> float:  # durability sync
            with jinja_only():
                took: float = await sample()
            return took

        variants[f"{name} raw"] = raw
        variants[f"{name} raw astream"] = raw_astream
        variants[f"{name} raw+sqlite"] = raw_sqlite
        variants[f"{name} raw+sqlite NORMAL"] = functools.partial(raw_sqlite, app=durable_normal)
        for mode in MODES:
            variants[f"{name} blockyard {mode}"] = functools.partial(blockyard, mode=mode)
        variants[f"{name} blockyard sync FULL"] = functools.partial(blockyard, on=full_yard)
        variants[f"{name} blockyard/jinja"] = blockyard_jinja
    variants = {name: _cpu_timed(cpu, name, sample) for name, sample in variants.items()}
    samples = await measure(variants, count, collect=collect)
    cpu = {name: values[-count:] for name, values in cpu.items()}  # the warm-up is not a sample
    yard.close()
    full_yard.close()
    saver_cm.__exit__(None, None, None)
    normal_cm.__exit__(None, None, None)

    kinds = [
        "raw",
        "raw astream",
        "raw+sqlite",
        "raw+sqlite NORMAL",
        *(f"blockyard {mode}" for mode in MODES),
        "blockyard sync FULL",
        "blockyard/jinja",
    ]
    figures = {
        name: {kind: median(samples[f"{name} {kind}"]) for kind in kinds} for name in WORKLOADS
    }
    if as_json:
        print(json.dumps({"cpu": _ratios(kinds, cpu), "wall": _ratios(kinds, samples)}))
    elif show:
        _show_per_step(kinds, cpu, samples)
    return figures


# the ratios --repeat publishes: each Blockyard mode to raw LangGraph without a checkpointer, and
# Blockyard's durable runs to raw + SqliteSaver at equal guarantees
EQUAL = {
    "sync / raw+sqlite NORMAL": ("blockyard sync", "raw+sqlite NORMAL"),
    "sync FULL / raw+sqlite FULL": ("blockyard sync FULL", "raw+sqlite"),
}


def _ratios(kinds: list[str], measured: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """workload -> figure -> ratio of medians (see EQUAL)."""
    ratios: dict[str, dict[str, float]] = {}
    for name in WORKLOADS:
        times = {kind: median(measured[f"{name} {kind}"]) for kind in kinds}
        ratios[name] = {kind: times[kind] / times["raw"] for kind in kinds if kind != "raw"}
        ratios[name]["raw ms"] = times["raw"] * 1000
        for figure, (ours, theirs) in EQUAL.items():
            ratios[name][figure] = times[ours] / times[theirs]
    return ratios


def _fresh_runs(runs: int, argv: list[str], settings: list[list[str]]) -> list[list[Any]]:
    """`runs` fresh processes of this script with `argv` for each of `settings` (extra arguments),
    the settings taking turns in alternating order; per setting, the JSON each run printed last."""
    results: list[list[Any]] = [[] for _ in settings]
    for index in range(runs):
        order = range(len(settings)) if index % 2 == 0 else reversed(range(len(settings)))
        for which in order:
            done = subprocess.run(
                [sys.executable, __file__, *argv, "--json", *settings[which]],
                capture_output=True,
                text=True,
                check=True,
                env=child_env(),
            )
            results[which].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"run {index + 1}/{runs} {' '.join(settings[which])}: done", file=sys.stderr)
    return results


def repeated(runs: int, count: int, only: str | None, quick: bool = False) -> None:
    """The table `only` (the per-step one by default, or the summary, or the cold start) in `runs`
    fresh processes; each figure as the range over all of them."""
    sizes = ["--quick"] if quick else []
    if only == "summary":
        argv = ["--only", "summary", "--rounds", str(count), *sizes]
        show_summary(_fresh_runs(runs, argv, [[]])[0], quick)
    elif only == "cold":
        _show_cold(_fresh_runs(runs, ["--only", "cold", "--rounds", str(count)], [[]])[0], count)
    elif only in (None, "steps"):
        _repeated_steps(runs, count)
    else:
        raise SystemExit(f"--repeat covers the steps, summary and cold tables, not {only}")


def _repeated_steps(runs: int, count: int) -> None:
    """The per-step table, each run with and without a garbage collection before every sample: for
    each figure the range over all of them (the worse of the two settings is inside it), then each
    setting's own range."""
    argv = ["--only", "steps", "--rounds", str(count)]
    without, with_ = _fresh_runs(runs, argv, [[], ["--collect"]])
    results = {False: without, True: with_}
    figures = [key for key in next(iter(results[False][0]["cpu"].values())) if key != "raw ms"]
    for clock in ("cpu", "wall"):
        header(
            f"per-run {clock.upper() if clock == 'cpu' else clock} time, ratios to raw LangGraph without a "
            f"checkpointer (last two: to raw + SqliteSaver at equal guarantees): the range of {runs} runs "
            "with and without a collection before every sample"
        )
        rows = []
        for name in WORKLOADS:
            every = [result[clock][name] for setting in results.values() for result in setting]
            row = [name, _span([figure["raw ms"] for figure in every], "{:.1f} ms")]
            row += [_span([figure[key] for figure in every], "{:.2f}x") for key in figures]
            rows.append(row)
        print(table(["workload", "raw", *figures], rows))
    for collect, setting in results.items():
        print(f"\ncollection before every sample: {'yes' if collect else 'no'} (CPU time)")
        rows = [
            [
                name,
                *(
                    _span([result["cpu"][name][key] for result in setting], "{:.2f}x")
                    for key in figures
                ),
            ]
            for name in WORKLOADS
        ]
        print(table(["workload", *figures], rows))


def _span(values: list[float], fmt: str) -> str:
    """The range of `values`, each formatted with `fmt`, the unit written once: "0.86–0.94x"."""
    low, high = fmt.format(min(values)), fmt.format(max(values))
    if low == high:
        return low
    number = re.compile(r"^([-+\d.,]+)(\D*)$")
    a, b = number.match(low), number.match(high)
    if a and b and a.group(2) == b.group(2):
        return f"{a.group(1)}–{b.group(1)}{a.group(2)}"
    return f"{low}–{high}"


def _show_per_step(
    kinds: list[str], cpu: dict[str, list[float]], samples: dict[str, list[float]]
) -> None:
    """The per-run tables of `per_step`, CPU and wall time, each variant as a ratio to raw LangGraph."""
    for clock, measured in (("CPU time", cpu), ("wall time", samples)):
        header(
            f"per-run {clock} as a ratio to raw LangGraph without a checkpointer "
            f"({RUNS_PER_SAMPLE} runs per sample)"
        )
        rows = []
        for name in WORKLOADS:
            times = {kind: median(measured[f"{name} {kind}"]) for kind in kinds}
            base = times["raw"]
            rows.append(
                [
                    name,
                    *(f"{times[kind] * 1000:.1f} ms ({times[kind] / base:.2f}x)" for kind in kinds),
                    f"{times['blockyard sync'] / times['raw+sqlite NORMAL']:.2f}x",
                    f"{times['blockyard sync FULL'] / times['raw+sqlite']:.2f}x",
                ]
            )
        print(
            table(
                [
                    "workload",
                    "raw, no checkpointer",
                    "raw, async nodes, astream",
                    "raw + SqliteSaver (sync), FULL",
                    "raw + SqliteSaver (sync), NORMAL",
                    *(f"blockyard {mode}" for mode in MODES),
                    "blockyard sync, FULL",
                    "blockyard sync, Jinja only",
                    "blockyard sync / raw+sqlite, both NORMAL",
                    "both FULL",
                ],
                rows,
            )
        )
    print(
        "\nFULL: SQLite's synchronous=FULL (every commit synced: survives a power cut; SqliteSaver's default); "
        "NORMAL: synchronous=NORMAL (survives a crash of the process; Blockyard's default, docs/runtime.md, "
        '"The disk guarantee"). The blockyard modes without a level are at NORMAL.'
    )
    print(
        "\nraw, async nodes, astream: the hand-written graph with async nodes, streamed as the engine streams its"
        " graph (LangGraph's async engine alone).\nblockyard, Jinja only: the same runs with the template fast path"
        " off (engine/templates/fast.py)."
    )


async def expressions(count: int) -> None:
    cases = {
        "n + 1": {"n": 1},
        "context.verdict == 'pass'": {"context": {"verdict": "pass"}},
        "inputs.a": {"inputs": {"a": 1}},
        "context.items[0] * 2 > y": {"context": {"items": [3]}, "y": 1},
    }
    calls = 2000
    variants: dict[str, Any] = {}
    for source, scope in cases.items():
        for fast in (True, False):

            async def sample(
                source: str = source, scope: dict[str, Any] = scope, fast: bool = fast
            ) -> float:
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
        rows.append(
            [
                f"`{source}`",
                f"{fast_t * 1e6:.1f} us",
                f"{jinja_t * 1e6:.1f} us",
                f"{fast_t / jinja_t:.2f}x",
            ]
        )
    print(table(["expression", "fast path", "Jinja", "fast / Jinja"], rows))


def child_cpu(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds (user + sys) of one child process, and its output; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


async def cold_start(count: int, as_json: bool = False) -> None:
    """Fresh processes, interleaved: `blockyard run hello` on the mock (the example yard, no API key:
    the default profile is the mock), the hand-written script with and without a chat model, a bare
    `python -c pass`, and the first compile of a 200-step flow after the imports."""
    root = Path(make_yard({}))
    for folder in ("blocks", "flows", "prompts", "schemas"):
        shutil.rmtree(root / folder, ignore_errors=True)
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "blockyard.yaml", root / "blockyard.yaml")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in (*KEYS, "PYTHONDONTWRITEBYTECODE")
    }
    # bytecode as an installed package has it (the warm-up round writes it), in a folder of its own: with
    # PYTHONDONTWRITEBYTECODE the engine's modules would be compiled from source in every process
    env["PYTHONPATH"], env["PYTHONPYCACHEPREFIX"] = str(REPO), str(root / "pycache")
    raw_state = fresh_db(root / "raw", "hello.sqlite")
    python = sys.executable
    argvs = {
        "blockyard run hello": [python, "-m", "engine", "run", "hello"],
        "raw LangGraph script": [python, str(BENCH / "raw_hello.py"), str(raw_state)],
        "raw script, no chat model": [
            python,
            str(BENCH / "raw_hello.py"),
            str(raw_state),
            "--no-model",
        ],
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
    # the warm-up run creates the state databases and the bytecode
    samples = await measure(variants, count)
    assert "loud: 'GREET: NAME=WORLD'" in outputs["blockyard run hello"], outputs[
        "blockyard run hello"
    ]
    assert "loud: 'GREET: NAME=WORLD'" in outputs["raw LangGraph script"], outputs[
        "raw LangGraph script"
    ]
    firsts = firsts[1:]  # the warm-up's

    base = samples["raw LangGraph script"]
    figures: dict[str, dict[str, float]] = {
        name: {
            "ms": median(samples[name]) * 1000,
            "ratio": median([value / raw for value, raw in zip(samples[name], base, strict=True)]),
        }
        for name in argvs
    }
    figures["first compile"] = {
        key: median([f[key] for f in firsts]) for key in ("imports_ms", "chain_ms", "mixed_ms")
    }
    if as_json:
        print(json.dumps(figures))
    else:
        _show_cold([figures], count)


def _show_cold(runs: list[dict[str, dict[str, float]]], count: int) -> None:
    """The cold-start table: each figure as the range over `runs`."""
    header(
        f"cold start: CPU time (user + sys) of a fresh process, medians of {count} interleaved rounds"
        + (f", the range of {len(runs)} runs" if len(runs) > 1 else "")
    )
    rows = [
        [
            name,
            _span([run[name]["ms"] for run in runs], "{:.0f} ms"),
            _span([run[name]["ratio"] for run in runs], "{:.2f}x"),
        ]
        for name in runs[0]
        if name != "first compile"
    ]
    print(table(["process", "CPU", "per-round ratio to the raw script"], rows))

    def first(key: str, fmt: str) -> str:
        return _span([run["first compile"][key] for run in runs], fmt)

    print(
        f"\nfirst compile of a 200-step flow in a fresh process, after its imports "
        f"({first('imports_ms', '{:.0f}')} ms), CPU: chain {first('chain_ms', '{:.1f}')} ms, mixed "
        f"(routers, loop, map) {first('mixed_ms', '{:.1f}')} ms (bench/bench_compile.py --first)"
    )


def scripts(quick: bool) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each bench script the summary runs: its arguments and environment, at the README's sizes
    (or small ones for --quick: a smoke run whose figures mean nothing)."""

    def pick(default: str, small: str) -> str:
        return small if quick else default

    return {
        "validate": (
            [
                "bench_validate.py",
                "--json",
                "--flows",
                pick("1000", "100"),
                "--runs",
                pick("5", "1"),
                "--cli-runs",
                pick("10", "2"),
            ],
            {},
        ),
        "compile": (
            ["bench_compile.py", "--json", "--steps", "200", "--reps", pick("30", "3")],
            {},
        ),
        "reload": (
            ["bench_reload.py", "--json"],
            {"BENCH_FLOWS": "10", "BENCH_EDITS": pick("30", "3")},
        ),
        "serve": (
            ["bench_serve.py", "--json"],
            {
                "BENCH_RUNS": pick("200", "20"),
                "BENCH_RELOADS": pick("50", "3"),
                "BENCH_ROUNDS": pick("3", "1"),
            },
        ),
        "threads": (["bench_threads.py", pick("100", "12"), "--json"], {}),
        "concurrency": (
            ["bench_concurrency.py", "--json"],
            {"BENCH_RUNS": pick("500", "50"), "BENCH_ROUNDS": pick("3", "1")},
        ),
        "agents": (["bench_agents.py", "--json"], {"BENCH_ROUNDS": pick("7", "1")}),
    }


def run_script(argv: list[str], extra: dict[str, str]) -> dict[str, Any]:
    """One bench script in a process of its own (its event loop, its databases, its memory); the
    JSON object its last line prints. BENCH_* of this process are not passed on: BENCH_RUNS means
    runs per sample here, concurrent runs there."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("BENCH_")}
    env.update(extra, PYTHONPATH=str(REPO))
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(BENCH / argv[0]), *argv[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    print(
        f"  {' '.join([*(f'{k}={v}' for k, v in extra.items()), *argv])}: {time.perf_counter() - began:.0f} s",
        file=sys.stderr,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# one figure of the summary: what, ours, base, fmt, baseline, target; or, for counts with no baseline,
# what, text (a format of the counts' names), counts, target
SummaryRow = dict[str, Any]


def summary(steps: Figures, quick: bool) -> list[SummaryRow]:
    """One row per figure the README states: Blockyard's, its baseline, the README's target."""
    got = {name: run_script(*spec) for name, spec in scripts(quick).items()}
    rows: list[SummaryRow] = []

    def row(what: str, ours: float, base: float, fmt: str, baseline: str, target: str) -> None:
        rows.append(
            {
                "what": what,
                "ours": ours,
                "base": base,
                "fmt": fmt,
                "baseline": baseline,
                "target": target,
            }
        )

    v = got["validate"]
    row(
        f"validate {v['flows']:,} generated flow files, one process",
        v["bulk_s"],
        2.0,
        "{:.2f} s",
        "target",
        "< 2 s",
    )
    row(
        "cold `blockyard validate` on the example yard",
        v["cold_cli_s"],
        0.3,
        "{:.2f} s",
        "target",
        "< 0.3 s",
    )
    c = got["compile"]
    raw_compile = f"LangGraph build + compile, {c['steps']}-node chain"
    row(
        f"compile a {c['steps']}-step flow (chain)",
        c["chain_ms"],
        c["raw_ms"],
        "{:.1f} ms",
        raw_compile,
        "< 30 ms",
    )
    row(
        f"compile a {c['steps']}-step flow (routers, loop, map)",
        c["mixed_ms"],
        c["raw_ms"],
        "{:.1f} ms",
        raw_compile,
        "< 30 ms",
    )
    for name in ("loop50", "router10", "chain50", "map200"):
        # at equal guarantees: both at synchronous=NORMAL (a crash of the process), both at FULL (a power cut)
        row(
            f"one run of {name}, durable (sync), synchronous=NORMAL",
            steps[name]["blockyard sync"] * 1000,
            steps[name]["raw+sqlite NORMAL"] * 1000,
            "{:.1f} ms",
            "LangGraph + SqliteSaver, NORMAL",
            "≤ 1.1x",
        )
        row(
            f"one run of {name}, durable (sync), synchronous=FULL",
            steps[name]["blockyard sync FULL"] * 1000,
            steps[name]["raw+sqlite"] * 1000,
            "{:.1f} ms",
            "LangGraph + SqliteSaver, FULL (its default)",
            "≤ 1.1x",
        )
    k = got["concurrency"]
    what = f"{k['runs']} concurrent durable runs, {k['steps']} steps, mock model {k['delay_s'] * 1000:.0f} ms per call"
    # at equal guarantees: AsyncSqliteSaver at its defaults is synchronous=FULL (every commit synced)
    row(
        what + ", synchronous=FULL",
        k["FULL"]["wall_s"],
        k["raw"]["wall_s"],
        "{:.2f} s",
        "LangGraph + AsyncSqliteSaver (FULL, its default)",
        "≤ 0.5x",
    )
    row(
        "same runs at synchronous=NORMAL (the default), CPU",
        k["NORMAL"]["cpu_s"],
        k["memory"]["cpu_s"],
        "{:.2f} s",
        "LangGraph, no checkpointer",
        "≤ 2x (issue 15)",
    )
    r = got["reload"]
    row(
        "save -> new version served by `blockyard serve` (10-flow yard)",
        r["median_ms"]["10"],
        300,
        "{:.0f} ms",
        "target",
        "< 300 ms",
    )
    h = got["serve"]
    row(
        f"{h['runs']} concurrent runs over HTTP (p50)",
        h["http_p50_ms"],
        h["inproc_p50_ms"],
        "{:.0f} ms",
        "in-process",
        "≤ 1.3x",
    )
    rows.append(
        {
            "what": "errors among those runs",
            "text": "{n}",
            "counts": {"n": h["errors"]},
            "target": "0",
        }
    )
    rows.append(
        {
            "what": f"{h['reloads']} hot reloads under that load",
            "text": "{failed} failed or on a wrong version, of {runs} runs",
            "counts": {"failed": h["reload_failed"], "runs": h["reload_runs"]},
            "target": "0",
        }
    )
    t = got["threads"]
    row(
        f"database size after a {t['turns']}-turn conversation thread",
        t["blockyard bytes"] / 1024,
        t["raw bytes"] / 1024,
        "{:,.0f} KiB",
        "LangGraph, add_messages + SqliteSaver",
        "< 1 MB",
    )
    row(
        "same, an llm block with `history: 20`",
        t["history bytes"] / 1024,
        1e6 / 1024,
        "{:,.0f} KiB",
        "target",
        "< 1 MB",
    )
    a = got["agents"]["fanout_ms"]
    row(
        "8 sub-agents in one turn, model 200 ms each",
        a["8"],
        a["1"],
        "{:.0f} ms",
        "1 sub-agent",
        "parallel (~1x)",
    )
    return rows


def show_summary(runs: list[list[SummaryRow]], quick: bool) -> None:
    """The summary's table: each figure (and its baseline, and their ratio) as the range over `runs`."""
    header(
        "summary: the README's figures against their baselines"
        + (f", the range of {len(runs)} runs" if len(runs) > 1 else "")
    )
    rows: list[list[str]] = []
    for same in zip(*runs, strict=True):
        first = same[0]
        if "text" in first:
            counts = {
                name: _span([figure["counts"][name] for figure in same], "{:.0f}")
                for name in first["counts"]
            }
            rows.append([first["what"], first["text"].format(**counts), "-", "-", first["target"]])
            continue
        fmt = first["fmt"]
        rows.append(
            [
                first["what"],
                _span([figure["ours"] for figure in same], fmt),
                f"{first['baseline']}: {_span([figure['base'] for figure in same], fmt)}",
                _span([figure["ours"] / figure["base"] for figure in same], "{:.2f}x"),
                first["target"],
            ]
        )
    print(table(["what", "Blockyard", "baseline", "ratio", "target"], rows))
    print(
        "\nbaseline `target`: no raw counterpart, the ratio is to the README's target. "
        + ("--quick: small sizes, the figures mean nothing." if quick else "Sizes: the README's.")
    )


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    models = (
        [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        if cpuinfo.exists()
        else []
    )
    model = models[0] if models else platform.processor() or "unknown CPU"
    return (
        f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, "
        f"LangGraph {importlib.metadata.version('langgraph')}, {platform.system()} {platform.release()}"
    )


async def main() -> None:
    global MARKDOWN, JSON
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, help="interleaved rounds per variant (default 7, --quick 2)"
    )
    parser.add_argument(
        "--only", choices=["steps", "expressions", "cold", "summary"], help="one table only"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds, small sizes")
    parser.add_argument("--markdown", action="store_true", help="Markdown to paste into the README")
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="the table of --only (steps by default; summary, cold) N times, each in a fresh process, "
        "every figure as the range (the steps table with and without --collect)",
    )
    parser.add_argument(
        "--collect", action="store_true", help="a full garbage collection before every sample"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="with --only steps, summary or cold: the figures as one JSON line (what --repeat reads)",
    )
    args = parser.parse_args()
    MARKDOWN, JSON = args.markdown, args.json
    if JSON and args.only not in ("steps", "summary", "cold"):
        parser.error("--json needs --only steps, summary or cold")
    count = args.rounds or (2 if args.quick else rounds(7))
    began = time.perf_counter()
    if args.repeat:
        repeated(args.repeat, count, args.only, args.quick)
        took = time.perf_counter() - began
        print(f"\nmachine: {machine()}; {count} rounds per run; total {took / 60:.1f} min.")
        return
    steps: Figures = {}
    if args.only in (None, "steps", "summary"):  # the summary's per-run rows come from this table
        steps = await per_step(
            count,
            show=args.only != "summary",
            collect=args.collect,
            as_json=JSON and args.only == "steps",
        )
        if JSON and args.only == "steps":
            return
    if args.only in (None, "expressions"):
        await expressions(count)
    if args.only in (None, "cold"):
        await cold_start(count, as_json=JSON)
    if args.only in (None, "summary"):
        rows = summary(steps, args.quick)
        if JSON:
            print(json.dumps(rows))
            return
        show_summary([rows], args.quick)
    if JSON:
        return
    took = time.perf_counter() - began
    print(
        f"\n{'Machine' if MARKDOWN else 'machine'}: {machine()}; {count} rounds"
        f"{', --quick' if args.quick else ''}; total {took / 60:.1f} min ({took:.0f} s)."
    )


if __name__ == "__main__":
    run(main)
