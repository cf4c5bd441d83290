"""A turn of a conversation thread as the graph sees it (the thread's rows are engine/state/threads.py).

A turn's first state carries only what is new — its inputs, a fresh context, and one human message
made from the inputs — never the stored history: `messages` has an append reducer, so re-sending
history would duplicate it. When the turn finishes, its reply is appended once, as if written by
the graph's reply node, and the checkpoints before it are pruned.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Overwrite

from engine.state import threads
from engine.state.checkpointer import StateDB


def turn_state(inputs: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The first state of a turn: only what is new (the stored messages stay where they are)."""
    return {"inputs": inputs, "context": Overwrite({}), "results": Overwrite([]), "loops": Overwrite({}),
            "messages": [HumanMessage(threads.turn_text(inputs), id=f"{run_id}.in")]}


async def finish_turn(db: StateDB, graph: Any, thread_id: str, run_id: str, outputs: dict[str, Any] | None,
                      reply_node: str) -> None:
    """Append the turn's reply to the thread's messages, then drop the checkpoints before it."""
    config = {"configurable": {"thread_id": thread_id}}
    state = await graph.aget_state(config)
    # pruned before and after the reply's checkpoint: the file never holds more than one extra copy
    await db.writer.write(*threads.prune(thread_id, state.config["configurable"]["checkpoint_id"]))
    reply = AIMessage(threads.reply_text(outputs), id=f"{run_id}.out")
    saved = await graph.aupdate_state(config, {"messages": [reply]}, as_node=reply_node)
    await db.writer.write(*threads.prune(thread_id, saved["configurable"]["checkpoint_id"]))
