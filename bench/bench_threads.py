"""How big a conversation thread's database gets, and what a turn costs as the thread grows:
100 turns of a two-step flow, each turn a ~300-character message and a ~310-character reply
(two messages per turn in the thread's state).

Variants (sizes are deterministic, so one round is enough):
- blockyard: `Yard.arun(flow, inputs, thread=...)` — finished turns pruned to one checkpoint;
- blockyard, no pruning: the same with pruning switched off (what the messages cost per step);
- raw LangGraph: a one-node graph with `add_messages` on a SqliteSaver, one invoke per turn
  (a plain chat, which appends one message per turn).
Size = the file after `PRAGMA wal_checkpoint(TRUNCATE)`; "in use" leaves out free pages.

Then the cost of a turn against the thread's length: a flow whose llm block (offline mock model)
is sent the conversation with `history: 20`; the median time of turns 2-11 against turns 91-100
(the target: within 1.5x), and the database file after 100 turns (the target: under 1 MB).

    python bench/bench_threads.py [TURNS] [--json]    # --json: the sizes (bytes) as one JSON object
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import header, make_yard, table
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from engine import Yard
from engine.state.checkpointer import DurableSaver

# ~300 characters
TEXT = "Please keep the usual order, but " + "with a little more rice and no onions " * 7

FILES = {
    "blocks/answer.yaml": """
        block: answer
        kind: transform
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        compute: {reply: "'Noted: ' ~ message"}
    """,
    "blocks/tidy.yaml": """
        block: tidy
        kind: transform
        inputs: {message: {type: string}}
        outputs: {clean: {type: string}}
        compute: {clean: "message | trim"}
    """,
    "blocks/talk.yaml": """
        block: talk
        kind: llm
        history: 20
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {system: "You take lunch orders.", user: "{{ message }}"}
    """,
    "flows/talk.yaml": """
        flow: talk
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: tidy, uses: tidy}
          - {id: answer, uses: talk, with: {message: "{{ context.clean }}"}}
    """,
    "flows/chat.yaml": """
        flow: chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: tidy, uses: tidy}
          - {id: answer, uses: answer, with: {message: "{{ context.clean }}"}}
    """,
}


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


def size(path: Path) -> tuple[int, int, int, int]:
    """(file bytes after a WAL checkpoint, bytes in use, checkpoint bytes, checkpoint rows)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, free, page = (
            conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("page_count", "freelist_count", "page_size")
        )
        rows, stored = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
            "FROM checkpoints"
        ).fetchone()
        written = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()[0]
    finally:
        conn.close()
    return path.stat().st_size, (pages - free) * page, stored + written, rows


async def blockyard(prune: bool, turns: int) -> tuple[Path, float]:
    root = make_yard(FILES)
    original = DurableSaver.prune_writes
    if not prune:
        DurableSaver.prune_writes = lambda self, thread_id, keep: []  # type: ignore[method-assign]
    try:
        began = time.perf_counter()
        async with Yard.load(root) as yard:
            for turn in range(turns):
                result = await yard.arun("chat", {"message": f"{turn}: {TEXT}"}, thread="t")
                assert result.status == "finished", result.error
        elapsed = time.perf_counter() - began
    finally:
        DurableSaver.prune_writes = original  # type: ignore[method-assign]
    return root / ".blockyard" / "state.db", elapsed


def raw_langgraph(turns: int) -> tuple[Path, float]:
    def reply(state: Chat) -> Chat:
        return {"messages": [AIMessage("Noted: " + str(state["messages"][-1].content))]}

    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    path = Path(tempfile.mkdtemp(prefix="blockyard-bench-")) / "raw.db"
    began = time.perf_counter()
    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = builder.compile(checkpointer=saver)
        for turn in range(turns):
            graph.invoke(
                {"messages": [HumanMessage(f"{turn}: {TEXT}")]},
                {"configurable": {"thread_id": "t"}},
            )
    return path, time.perf_counter() - began


def kib(value: int) -> str:
    return f"{value / 1024:,.0f} KiB"


async def turn_costs(turns: int) -> tuple[list[float], Path, int]:
    """Seconds per turn of the `talk` flow (history: 20), the database, and the messages sent last."""
    root = make_yard(FILES)
    costs: list[float] = []
    async with Yard.load(root) as yard:
        for turn in range(turns):
            began = time.perf_counter()
            result = await yard.arun("talk", {"message": f"{turn}: {TEXT}"}, thread="t")
            costs.append(time.perf_counter() - began)
            assert result.status == "finished", result.error
        sent = len(yard.history("t", limit=1000))
    return costs, root / ".blockyard" / "state.db", sent


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "turns", type=int, nargs="?", default=100, help="turns in the thread (default 100)"
    )
    parser.add_argument("--json", action="store_true", help="file sizes (bytes) as one JSON object")
    args = parser.parse_args()
    turns = args.turns
    variants = {
        "blockyard": await blockyard(True, turns),
        "blockyard, no pruning": await blockyard(False, turns),
        "raw": raw_langgraph(turns),
    }
    if args.json:
        _costs, talk, _stored = await turn_costs(turns)
        print(
            json.dumps(
                {
                    "turns": turns,
                    **{f"{name} bytes": size(db)[0] for name, (db, _) in variants.items()},
                    "history bytes": size(talk)[0],
                }
            )
        )
        return
    header(f"A {turns}-turn conversation thread: database size")
    rows = []
    labels = {
        "blockyard": "blockyard (pruned turns)",
        "raw": "raw LangGraph, add_messages + SqliteSaver",
    }
    for name, (path, elapsed) in variants.items():
        on_disk, in_use, checkpoint_bytes, checkpoints = size(path)
        rows.append(
            [
                labels.get(name, name),
                kib(on_disk),
                kib(in_use),
                kib(checkpoint_bytes),
                str(checkpoints),
                f"{elapsed / turns * 1000:.1f} ms",
            ]
        )
    print(
        table(["variant", "file", "in use", "checkpoint data", "checkpoint rows", "per turn"], rows)
    )
    print(
        "\nfile - in use = free pages, reused by later turns (pruning frees a turn's step checkpoints);\n"
        "the rest of `in use` is blockyard's own tables: the runs and their event trace."
    )
    print(
        f"\npayload: {turns} turns x ~{len(TEXT) + 5} + ~{len(TEXT) + 12} characters "
        f"= {turns * (2 * len(TEXT) + 17) / 1024:,.0f} KiB of text"
    )

    header(f"The cost of a turn as the thread grows (an llm block with history: 20, {turns} turns)")
    costs, path, stored = await turn_costs(turns)
    early, late = sorted(costs[1:11])[5], sorted(costs[-10:])[5]  # medians: this machine is shared
    fastest_early, fastest_late = min(costs[1:11]), min(costs[-10:])
    on_disk, in_use, checkpoint_bytes, checkpoints = size(path)
    print(
        table(
            ["turns", "median ms", "fastest ms", ""],
            [
                ["2-11", f"{early * 1000:.1f}", f"{fastest_early * 1000:.1f}", ""],
                [
                    f"{turns - 9}-{turns}",
                    f"{late * 1000:.1f}",
                    f"{fastest_late * 1000:.1f}",
                    f"{late / early:.2f}x (fastest: {fastest_late / fastest_early:.2f}x) of "
                    "turns 2-11 (target: 1.5x at most)",
                ],
            ],
        )
    )
    print(
        f"\ndatabase after {turns} turns: {kib(on_disk)} file, {kib(in_use)} in use, "
        f"{kib(checkpoint_bytes)} of checkpoints in {checkpoints} row(s) (target: under 1 MB); "
        f"messages table: {stored} rows"
    )


if __name__ == "__main__":
    asyncio.run(main())
