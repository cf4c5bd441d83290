"""Where the durable-run time goes: 500 concurrent runs of a 5-node LangGraph graph (each node
sleeps 50 ms, like a model call), with LangGraph's AsyncSqliteSaver and with our group-commit
DurableSaver under several settings. Plain LangGraph, no engine: this isolates the saver.

    python bench/bench_saver.py            # BENCH_ROUNDS=3 by default
"""

from __future__ import annotations

import asyncio
import operator
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, TypedDict

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fresh_db, header, measure, median, rounds, run, table

from engine.state.checkpointer import StateDB

RUNS = 500
NODES = 5
SLEEP = 0.05


class State(TypedDict, total=False):
    log: Annotated[list[int], operator.add]


def graph() -> StateGraph:
    builder = StateGraph(State)
    previous = START
    for index in range(NODES):

        async def node(state: State, index: int = index) -> State:
            await asyncio.sleep(SLEEP)
            return {"log": [index]}

        builder.add_node(f"n{index}", node)
        builder.add_edge(previous, f"n{index}")
        previous = f"n{index}"
    builder.add_edge(previous, END)
    return builder


async def burst(app: Any, durability: str | None, tag: str) -> None:
    outs = await asyncio.gather(
        *(
            app.ainvoke(
                {"log": []}, {"configurable": {"thread_id": f"{tag}-{i}"}}, durability=durability
            )
            for i in range(RUNS)
        )
    )
    assert all(out["log"] == list(range(NODES)) for out in outs)


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="blockyard-bench-saver-"))
    builder = graph()
    counter = iter(range(10**9))
    commits: dict[str, list[int]] = {}

    def raw(synchronous: str | None, durability: str) -> Any:
        async def sample() -> float:
            path = fresh_db(folder, "raw.db")
            async with aiosqlite.connect(path) as conn:
                if synchronous:
                    await conn.execute("PRAGMA journal_mode=WAL")
                    await conn.execute(f"PRAGMA synchronous={synchronous}")
                app = builder.compile(checkpointer=AsyncSqliteSaver(conn))
                began = asyncio.get_running_loop().time()
                await burst(app, durability, f"r{next(counter)}")
                return asyncio.get_running_loop().time() - began

        return sample

    def ours(synchronous: str, durability: str) -> Any:
        name = f"DurableSaver (group commit), synchronous={synchronous}, durability={durability}"

        async def sample() -> float:
            db = StateDB(fresh_db(folder, "ours.db"), synchronous=synchronous)
            try:
                app = builder.compile(checkpointer=db.saver)
                before = db.writer.commits
                began = asyncio.get_running_loop().time()
                await burst(app, durability, f"o{next(counter)}")
                took = asyncio.get_running_loop().time() - began
                commits.setdefault(name, []).append(db.writer.commits - before)
                return took
            finally:
                db.close()

        return sample

    async def none() -> float:
        app = builder.compile()
        began = asyncio.get_running_loop().time()
        await burst(app, None, "n")
        return asyncio.get_running_loop().time() - began

    variants = {
        "LangGraph, no checkpointer": none,
        "AsyncSqliteSaver, defaults (synchronous=FULL, durability=async)": raw(None, "async"),
        "AsyncSqliteSaver, synchronous=NORMAL, durability=async": raw("NORMAL", "async"),
        "DurableSaver (group commit), synchronous=FULL, durability=sync": ours("FULL", "sync"),
        "DurableSaver (group commit), synchronous=NORMAL, durability=sync": ours("NORMAL", "sync"),
        "DurableSaver (group commit), synchronous=NORMAL, durability=async": ours(
            "NORMAL", "async"
        ),
    }
    samples = await measure(variants, rounds(3))
    base = median(samples["AsyncSqliteSaver, defaults (synchronous=FULL, durability=async)"])
    header(
        f"{RUNS} concurrent runs x {NODES} nodes, each node sleeps {SLEEP * 1000:.0f} ms (ideal "
        f"{NODES * SLEEP:.2f} s)"
    )
    rows = []
    for name, values in samples.items():
        made = commits.get(name, [])
        rows.append(
            [
                name,
                f"{median(values):.2f} s",
                f"{median(values) / base:.2f}",
                f"{int(median(made))}" if made else "-",
            ]
        )
    print(table(["variant", "wall (median)", "x AsyncSqliteSaver", "commits"], rows))


if __name__ == "__main__":
    run(main)
