"""A child process for the saver tests: runs a small LangGraph graph on a StateDB.

usage: python saver_child.py DB MODE THREAD [COUNT]
  MODE=crash   run a -> slow -> b on THREAD; `slow` writes a marker file then sleeps (to be killed)
  MODE=resume  continue THREAD from its last checkpoint
  MODE=many    run COUNT threads named THREAD-<i> concurrently
Each node appends "<node>@<pid>" to the state's log.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from engine.state.checkpointer import StateDB


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def build(db: StateDB, marker: Path | None) -> Any:
    graph = StateGraph(State)

    async def a(state: State) -> State:
        return {"log": [f"a@{os.getpid()}"]}

    async def slow(state: State) -> State:
        if marker is not None:
            marker.write_text(str(os.getpid()))
            await asyncio.sleep(60)
        return {"log": [f"slow@{os.getpid()}"]}

    async def b(state: State) -> State:
        return {"log": [f"b@{os.getpid()}"]}

    for name, fn in (("a", a), ("slow", slow), ("b", b)):
        graph.add_node(name, fn)
    graph.add_edge(START, "a")
    graph.add_edge("a", "slow")
    graph.add_edge("slow", "b")
    graph.add_edge("b", END)
    return graph.compile(checkpointer=db.saver)


async def main(path: Path, mode: str, thread: str, count: int) -> None:
    db = StateDB(path)
    try:
        marker = path.parent / f"{thread}.marker" if mode == "crash" else None
        app = build(db, marker)
        if mode == "crash":
            await app.ainvoke(
                {"log": []}, {"configurable": {"thread_id": thread}}, durability="sync"
            )
        elif mode == "resume":
            out = await app.ainvoke(
                None, {"configurable": {"thread_id": thread}}, durability="sync"
            )
            print(json.dumps(out["log"]))
        else:
            outs = await asyncio.gather(
                *(
                    app.ainvoke(
                        {"log": []},
                        {"configurable": {"thread_id": f"{thread}-{i}"}},
                        durability="sync",
                    )
                    for i in range(count)
                )
            )
            print(json.dumps([len(out["log"]) for out in outs]))
    finally:
        db.close()


if __name__ == "__main__":
    asyncio.run(
        main(
            Path(sys.argv[1]),
            sys.argv[2],
            sys.argv[3],
            int(sys.argv[4]) if len(sys.argv) > 4 else 1,
        )
    )
