"""Per-run time of the engine against hand-written LangGraph doing the same work, both durable on
the same SQLite checkpointer (our group-commit DurableSaver, durability="sync", a fresh thread
per run). Runs go one at a time, so this is latency, not throughput. The engine's runs, one at a
time, commit their checkpoints on their own thread (engine/state/writer.py, `write`); the raw graph
declares no run, so its checkpoints go through the writer thread.

Workloads (every step computes one integer, no model):
  chain50   50 steps in a row, each adds 1
  map200    a parallel map over 200 items doubling each, joined in order
  loop50    a loop whose body adds 1, until the value reaches 50
  router10  10 routers in a row, each picking one of two steps by parity

The engine side is the whole run as users get it: `Yard.arun` with its runs row, its event trace
and output checks. The raw side is plain StateGraph code a developer would write. A third column
streams the compiled graph alone, to tell the compiler's share of the difference from the
runtime's.

    python bench/bench_overhead.py          # BENCH_ROUNDS=7 by default
"""

from __future__ import annotations

import asyncio
import operator
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import header, make_yard, measure, median, rounds, run, table

from engine import Yard
from engine.state.checkpointer import StateDB

RUNS_PER_SAMPLE = int(os.environ.get("BENCH_RUNS", 5))

BLOCKS = {
    "blocks/inc.yaml": """
        block: inc
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {n: {type: integer}}
        compute: {n: "n + 1"}
    """,
    "blocks/double.yaml": """
        block: double
        kind: transform
        inputs: {x: {type: integer}}
        outputs: {y: {type: integer}}
        compute: {y: "x * 2"}
    """,
}


def flows() -> dict[str, str]:
    chain = "\n".join(
        ['  - {id: s0, uses: inc, with: {n: "{{ inputs.n }}"}}']
        + [f"  - {{id: s{i}, uses: inc}}" for i in range(1, 50)]
    )
    routers = []
    for i in range(10):
        after = f"r{i + 1}" if i < 9 else "end"
        routers.append(
            f'  - id: r{i}\n    router:\n      routes: [{{expr: "context.n % 2 == 0", goto: e{i}}}]\n'
            f"      default: o{i}"
        )
        routers.append(f"  - {{id: e{i}, uses: inc, goto: {after}}}")
        routers.append(f"  - {{id: o{i}, uses: inc, goto: {after}}}")
    return {
        "flows/chain50.yaml": f"flow: chain50\ninputs: {{n: {{type: integer}}}}\noutputs: [n]\nsteps:\n{chain}\n",
        "flows/map200.yaml": """
            flow: map200
            inputs: {numbers: {type: array, items: {type: integer}}}
            outputs: [doubled]
            steps:
              - id: each
                map: {items: inputs.numbers, as: x, uses: double, collect: doubled}
        """,
        "flows/loop50.yaml": """
            flow: loop50
            inputs: {n: {type: integer}}
            outputs: [n]
            steps:
              - {id: start, uses: inc, with: {n: "{{ inputs.n }}"}}
              - id: grow
                loop:
                  max_iterations: 100
                  until: context.n >= 50
                  steps:
                    - {id: step, uses: inc}
        """,
        "flows/router10.yaml": (
            "flow: router10\ninputs: {n: {type: integer}}\noutputs: [n]\nsteps:\n"
            '  - {id: start, uses: inc, with: {n: "{{ inputs.n }}"}}\n' + "\n".join(routers) + "\n"
        ),
    }


# ---- the same work, hand-written --------------------------------------------------------------


class Counter(TypedDict, total=False):
    n: int


class Doubles(TypedDict, total=False):
    numbers: list[int]
    doubled: Annotated[list[int], operator.add]


def raw_chain(sync: bool = False) -> StateGraph:
    """`sync`: plain functions as nodes (for `invoke` and the sync SqliteSaver: bench/compare.py)."""
    inc = _inc_sync if sync else _inc
    graph = StateGraph(Counter)
    previous = START
    for i in range(50):
        graph.add_node(f"s{i}", inc)
        graph.add_edge(previous, f"s{i}")
        previous = f"s{i}"
    graph.add_edge(previous, END)
    return graph


async def _inc(state: Counter) -> Counter:
    return {"n": state["n"] + 1}


def _inc_sync(state: Counter) -> Counter:
    return {"n": state["n"] + 1}


def raw_map(sync: bool = False) -> StateGraph:
    graph = StateGraph(Doubles)

    async def double(item: dict[str, int]) -> Doubles:
        return {"doubled": [item["x"] * 2]}

    async def join(state: Doubles) -> None:
        return None

    def double_sync(item: dict[str, int]) -> Doubles:
        return {"doubled": [item["x"] * 2]}

    def join_sync(state: Doubles) -> None:
        return None

    graph.add_node("double", double_sync if sync else double)
    graph.add_node("join", join_sync if sync else join)
    graph.add_conditional_edges(
        START,
        lambda s: [Send("double", {"x": x}) for x in s["numbers"]] or ["join"],
        ["double", "join"],
    )
    graph.add_edge("double", "join")
    graph.add_edge("join", END)
    return graph


def raw_loop(sync: bool = False) -> StateGraph:
    inc = _inc_sync if sync else _inc
    graph = StateGraph(Counter)
    graph.add_node("start", inc)
    graph.add_node("step", inc)
    graph.add_edge(START, "start")
    graph.add_edge("start", "step")
    graph.add_conditional_edges("step", lambda s: END if s["n"] >= 50 else "step", ["step", END])
    return graph


def raw_router(sync: bool = False) -> StateGraph:
    inc = _inc_sync if sync else _inc
    graph = StateGraph(Counter)
    graph.add_node("start", inc)
    graph.add_edge(START, "start")
    sources = ["start"]
    for i in range(10):
        graph.add_node(f"e{i}", inc)
        graph.add_node(f"o{i}", inc)
        for source in sources:
            graph.add_conditional_edges(
                source, lambda s, i=i: f"e{i}" if s["n"] % 2 == 0 else f"o{i}", [f"e{i}", f"o{i}"]
            )
        sources = [f"e{i}", f"o{i}"]
    for source in sources:
        graph.add_edge(source, END)
    return graph


WORKLOADS: dict[
    str, tuple[Callable[..., StateGraph], dict[str, Any], Callable[[dict[str, Any]], Any]]
] = {
    "chain50": (raw_chain, {"n": 0}, lambda out: out["n"]),
    "map200": (raw_map, {"numbers": list(range(200))}, lambda out: out["doubled"]),
    "loop50": (raw_loop, {"n": 0}, lambda out: out["n"]),
    "router10": (raw_router, {"n": 0}, lambda out: out["n"]),
}


async def main() -> None:
    root = make_yard({**BLOCKS, **flows()})
    shutil.rmtree(root / ".blockyard", ignore_errors=True)
    yard = Yard.load(root)
    raw_db = StateDB(root / "raw.db")
    counter = iter(range(10**9))
    variants: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for name, (make_graph, inputs, answer) in WORKLOADS.items():
        app = make_graph().compile(checkpointer=raw_db.saver)
        compiled = yard.compiled(yard.bundle(name))

        async def raw_sample(
            app: Any = app,
            inputs: dict[str, Any] = inputs,
            name: str = name,
            answer: Callable[[dict[str, Any]], Any] = answer,
        ) -> float:
            loop = asyncio.get_running_loop()
            began = loop.time()
            for _ in range(RUNS_PER_SAMPLE):
                config = {
                    "configurable": {"thread_id": f"raw-{next(counter)}"},
                    "recursion_limit": 10_000,
                }
                out = await app.ainvoke(dict(inputs), config, durability="sync")
            took = loop.time() - began
            expected.setdefault(name, answer(out))
            return took / RUNS_PER_SAMPLE

        async def engine_sample(inputs: dict[str, Any] = inputs, name: str = name) -> float:
            loop = asyncio.get_running_loop()
            began = loop.time()
            for _ in range(RUNS_PER_SAMPLE):
                result = await yard.arun(name, inputs)
            took = loop.time() - began
            assert result.status == "finished", result.error
            got = result.outputs["doubled"] if name == "map200" else result.outputs["n"]
            if name == "map200":
                got = [entry["y"] for entry in got]
            assert name not in expected or got == expected[name], (name, got, expected[name])
            return took / RUNS_PER_SAMPLE

        async def graph_sample(
            compiled: Any = compiled, inputs: dict[str, Any] = inputs, name: str = name
        ) -> float:
            context, _note = yard.engine.context(compiled.bundle, "bench")
            loop = asyncio.get_running_loop()
            began = loop.time()
            for _ in range(RUNS_PER_SAMPLE):
                config = compiled.config(f"graph-{next(counter)}")
                async for _chunk in compiled.graph.astream(
                    compiled.initial_state(inputs),
                    config,
                    context=context,
                    stream_mode=["values"],
                    durability="sync",
                ):
                    pass
            return (loop.time() - began) / RUNS_PER_SAMPLE

        variants[f"{name} raw"] = raw_sample
        variants[f"{name} graph"] = graph_sample
        variants[f"{name} engine"] = engine_sample
    samples = await measure(variants, rounds(7))
    yard.close()
    raw_db.close()
    header(
        f"per-run time, engine vs hand-written LangGraph, same DurableSaver ({RUNS_PER_SAMPLE} runs per sample)"
    )
    rows = []
    for name in WORKLOADS:
        raw_t, graph_t, eng_t = (
            median(samples[f"{name} {kind}"]) for kind in ("raw", "graph", "engine")
        )
        rows.append(
            [
                name,
                f"{raw_t * 1000:.1f} ms",
                f"{graph_t * 1000:.1f} ms ({graph_t / raw_t:.2f})",
                f"{eng_t * 1000:.1f} ms",
                f"{eng_t / raw_t:.2f}",
                f"{eng_t / graph_t:.2f}",
            ]
        )
    print(
        table(
            [
                "workload",
                "LangGraph (raw)",
                "compiled graph alone",
                "blockyard run",
                "run / raw",
                "run / graph",
            ],
            rows,
        )
    )
    print(
        "\ncompiled graph alone: the compiler's graph streamed directly (no runs row, no trace);"
        " run / graph is the runtime's own cost."
    )


if __name__ == "__main__":
    run(main)
