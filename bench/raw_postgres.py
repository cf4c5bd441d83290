"""Raw LangGraph on AsyncPostgresSaver, the baseline of bench/bench_replicas.py: a 5-step graph whose
nodes wait 50 ms (the model call), compiled with LangGraph's AsyncPostgresSaver over a psycopg pool
(autocommit, prepare_threshold=0, dict rows: what its docs show). It runs a sample — RUNS runs, at most
IN_FLIGHT at once — each time a line arrives on stdin, and answers with the sample's wall time and each
run's latency on one line.

    python bench/raw_postgres.py URL STEPS DELAY_S RUNS IN_FLIGHT
"""

from __future__ import annotations

import asyncio
import operator
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

URL = sys.argv[1]
STEPS, DELAY, RUNS, IN_FLIGHT = (
    int(sys.argv[2]),
    float(sys.argv[3]),
    int(sys.argv[4]),
    int(sys.argv[5]),
)


class State(TypedDict):
    topic: str
    thoughts: Annotated[list[str], operator.add]


def think(i: int) -> Callable[[State], Awaitable[dict[str, Any]]]:
    async def node(state: State) -> dict[str, Any]:
        await asyncio.sleep(DELAY)  # the model call
        return {"thoughts": [f"thought {i} about {state['topic']}"]}

    return node


async def main() -> None:
    builder: StateGraph[State, Any, State, State] = StateGraph(State)
    for i in range(STEPS):
        builder.add_node(f"s{i}", think(i))
        builder.add_edge(START if i == 0 else f"s{i - 1}", f"s{i}")
    builder.add_edge(f"s{STEPS - 1}", END)
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        URL, min_size=IN_FLIGHT, max_size=IN_FLIGHT, kwargs=kwargs, open=False
    )
    async with pool:
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        app = builder.compile(checkpointer=saver)
        print("ready", flush=True)
        counter = 0
        for _line in sys.stdin:  # a line: one sample
            wall, latencies = await sample(app, counter)
            counter += RUNS
            print(wall, *latencies, flush=True)


async def sample(app: Any, first: int) -> tuple[float, list[float]]:
    """RUNS runs (threads first, first + 1, ...), at most IN_FLIGHT at once: the wall time, each latency."""
    gate = asyncio.Semaphore(IN_FLIGHT)
    latencies: list[float] = []

    async def one(n: int) -> None:
        async with gate:
            began = time.perf_counter()
            out = await app.ainvoke(
                {"topic": f"t{n}", "thoughts": []}, {"configurable": {"thread_id": f"r{n}"}}
            )
            assert len(out["thoughts"]) == STEPS
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(one(first + n) for n in range(RUNS)))
    return time.perf_counter() - began, latencies


if __name__ == "__main__":
    asyncio.run(main())
