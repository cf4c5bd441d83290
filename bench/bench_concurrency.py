"""500 concurrent durable runs of a 5-step flow whose model takes 50 ms per call (the mock
profile's `delay: 50ms`), against hand-written LangGraph doing the same with AsyncSqliteSaver at
its defaults (the figures are in docs/runtime.md, Performance).

    python bench/bench_concurrency.py         # BENCH_ROUNDS=3, BENCH_RUNS=500 by default
    python bench/bench_concurrency.py --json  # wall and CPU medians (seconds) per variant as one JSON object

Both sides are durable: every superstep is checkpointed to a SQLite file before the run goes on
(the engine with durability="sync" through its group-commit saver; raw LangGraph with its default
durability="async"). The engine also writes its runs row and every event. With runs side by side
every write goes through the group-commit writer thread (a lone run's inline commits do not apply).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fresh_db, header, make_yard, measure, median, rounds, run, table

from engine import Yard

RUNS = int(os.environ.get("BENCH_RUNS", 500))
STEPS = 5
DELAY = 0.05


def yard_files() -> dict[str, str]:
    files = {
        "blockyard.yaml": f"""
            models:
              default: {{provider: mock, delay: {int(DELAY * 1000)}ms}}
        """,
        "blocks/think.yaml": """
            block: think
            kind: llm
            inputs: {topic: {type: string}}
            outputs: {thought: {type: string}}
            prompt: {user: "Think about {{ topic }}."}
        """,
    }
    steps = "\n".join(
        f'  - {{id: s{i}, uses: think, with: {{topic: "{{{{ inputs.topic }}}} {i}"}}}}'
        for i in range(STEPS)
    )
    files["flows/five.yaml"] = (
        f"flow: five\ninputs: {{topic: {{type: string}}}}\noutputs: [thought]\nsteps:\n{steps}\n"
    )
    return files


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def raw_graph() -> StateGraph:
    builder = StateGraph(State)
    previous = START
    for index in range(STEPS):

        async def node(state: State, index: int = index) -> State:
            await asyncio.sleep(DELAY)
            return {"log": [f"thought {index}"]}

        builder.add_node(f"s{index}", node)
        builder.add_edge(previous, f"s{index}")
        previous = f"s{index}"
    builder.add_edge(previous, END)
    return builder


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json",
        action="store_true",
        help="wall and CPU medians (s) per variant as one JSON object",
    )
    as_json = parser.parse_args().json
    root = make_yard(yard_files())
    builder = raw_graph()
    counter = iter(range(10**9))
    commits: dict[str, list[int]] = {}
    cpu: dict[str, list[float]] = {}

    def timed_cpu(name: str, fn: Any) -> Any:
        async def sample() -> float:
            began = time.process_time()
            took = await fn()
            cpu.setdefault(name, []).append(time.process_time() - began)
            return took

        return sample

    def engine(synchronous: str) -> Any:
        name = f"blockyard, durable (group commit, synchronous={synchronous})"

        async def sample() -> float:
            state = root / ".blockyard"
            shutil.rmtree(state, ignore_errors=True)
            yard = Yard.load(root, synchronous=synchronous)
            try:
                yard.compiled(yard.bundle("five"))  # compile outside the timing, as a server would
                loop = asyncio.get_running_loop()
                began = loop.time()
                results = await asyncio.gather(
                    *(yard.arun("five", {"topic": f"t{i}"}) for i in range(RUNS))
                )
                took = loop.time() - began
                assert all(r.status == "finished" for r in results), {r.status for r in results}
                commits.setdefault(name, []).append(yard.db.writer.commits)
                return took
            finally:
                yard.close()

        return sample

    async def raw() -> float:
        path = fresh_db(root / "raw", "raw.db")
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            app = builder.compile(checkpointer=saver)
            tag = next(counter)
            loop = asyncio.get_running_loop()
            began = loop.time()
            outs = await asyncio.gather(
                *(
                    app.ainvoke({"log": []}, {"configurable": {"thread_id": f"{tag}-{i}"}})
                    for i in range(RUNS)
                )
            )
            took = loop.time() - began
            assert all(len(out["log"]) == STEPS for out in outs)
            return took

    async def raw_memory() -> float:
        app = builder.compile()
        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.gather(*(app.ainvoke({"log": []}) for _ in range(RUNS)))
        return loop.time() - began

    variants = {
        "LangGraph, AsyncSqliteSaver at defaults": raw,
        "blockyard, durable (group commit, synchronous=NORMAL)": engine("NORMAL"),
        "blockyard, durable (group commit, synchronous=FULL)": engine("FULL"),
        "LangGraph, no checkpointer (not durable; reference)": raw_memory,
    }
    variants = {name: timed_cpu(name, fn) for name, fn in variants.items()}
    samples = await measure(variants, rounds(3))
    if as_json:
        # keys: raw, NORMAL, FULL, memory (the variants' order); CPU without the warm-up's sample
        keys = ("raw", "NORMAL", "FULL", "memory")
        print(
            json.dumps(
                {
                    "runs": RUNS,
                    "steps": STEPS,
                    "delay_s": DELAY,
                    **{
                        key: {"wall_s": median(values), "cpu_s": median(cpu[name][-len(values) :])}
                        for key, (name, values) in zip(keys, samples.items(), strict=True)
                    },
                }
            )
        )
        return
    base = median(samples["LangGraph, AsyncSqliteSaver at defaults"])
    header(
        f"{RUNS} concurrent runs x {STEPS} steps, model/node latency {DELAY * 1000:.0f} ms "
        f"(ideal {STEPS * DELAY:.2f} s)"
    )
    base_cpu = median(
        cpu["LangGraph, AsyncSqliteSaver at defaults"][-len(samples[next(iter(samples))]) :]
    )
    rows = []
    for name, values in samples.items():
        used = median(cpu[name][-len(values) :])  # the warm-up's sample is first
        rows.append(
            [
                name,
                f"{median(values):.2f} s",
                f"{min(values):.2f}-{max(values):.2f} s",
                f"{median(values) / base:.2f}",
                f"{used:.2f} s ({used / base_cpu:.2f})",
                f"{int(median(commits[name]))}" if name in commits else "-",
            ]
        )
    print(
        table(
            ["variant", "wall (median)", "range", "x raw durable", "CPU (x raw)", "commits"], rows
        )
    )
    print(
        "\nCPU: seconds of CPU this process used (all threads); steadier than wall time on a shared machine."
    )


if __name__ == "__main__":
    run(main)
