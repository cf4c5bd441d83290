"""A turn of a conversation thread as the graph sees it (the thread's rows are engine/state/threads.py).

A turn's first state carries only what is new — its inputs, a fresh context, and one human message
made from the inputs — never the stored history: `messages` has an append reducer, so re-sending
history would duplicate it. A turn starts from the checkpoint of the thread's last finished turn
(`threads.checkpoint`), so a failed turn nobody resumed leaves nothing in the conversation, and it
drops from that checkpoint the turns no model of the flow can be sent any more (the messages table
keeps them; docs/memory.md). When the turn finishes, its reply is appended once, as if written by
the graph's reply node, its two rows go to the `messages` table, and the checkpoints before it are
pruned — all in the transaction that records the run's end (the execution commits what
`finish_turn` returns), so the checkpoint the models read and the table people read never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.types import Overwrite

from engine.core.values import JsonDict
from engine.nodes.history import choose
from engine.state import messages, threads
from engine.state.writer import Write


def turn_state(
    inputs: JsonDict,
    run_id: str,
    drop: Sequence[str] = (),
    *,
    fresh: bool = False,
    context: Mapping[str, Any] | None = None,
    branch: Sequence[Any] | None = None,
) -> JsonDict:
    """The first state of a turn: only what is new (the stored messages stay where they are), and
    the removal of the messages in `drop` (turns too old to be sent to any model any more). A
    `fresh` turn (no turn of the thread has finished) starts the conversation over. A turn that
    branches starts it over with its `branch`'s messages (`branch_messages`). `context` is what the
    turn's context starts with (the empty keys its steps accumulate, `reduce:`)."""
    said = HumanMessage(threads.turn_text(inputs), id=f"{run_id}.in")
    gone: list[Any] = [RemoveMessage(id=message_id) for message_id in drop]
    if branch is not None:
        kept = [message for message in branch if message.id not in set(drop)]
        talk: Any = Overwrite([*kept, said])
    else:
        talk = Overwrite([said]) if fresh else [*gone, said]
    return {
        "inputs": inputs,
        "context": Overwrite(dict(context or {})),
        "results": Overwrite([]),
        "loops": Overwrite({}),
        "messages": talk,
    }


def branch_messages(rows: Sequence[messages.Message]) -> list[Any]:
    """A branch's `messages` rows (engine/state/branches.py) as the checkpoint holds a conversation: a
    turn's message and its reply, with the ids its own turn gave them."""
    return [
        HumanMessage(row.content, id=f"{row.run_id}.in")
        if row.role == "user"
        else AIMessage(row.content, id=f"{row.run_id}.out")
        for row in rows
    ]


# ---- the conversation a turn starts with ------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    """A thread's conversation before a turn: what its models may be sent, and the ids of the
    stored messages too old for that, which the turn removes from the checkpoint."""

    said: tuple[tuple[str, str], ...] = ()
    drop: tuple[str, ...] = ()


def conversation(
    messages: Sequence[Any], run_id: str, window: int | None, budget: int
) -> Conversation:
    """The conversation in a checkpoint's `messages` up to the turn of `run_id` (a resumed turn
    finds its own message there already), cut to the flow's `window` of turns and `budget` of
    characters (engine/nodes/history.py)."""

    kept: list[tuple[str, str, str]] = []
    for message in messages:
        if str(message.id) == f"{run_id}.in":
            break
        role = "user" if message.type == "human" else "assistant" if message.type == "ai" else None
        if role is not None:
            kept.append((str(message.id), role, _text(message.content)))
    said = tuple((role, text) for _, role, text in kept)
    chosen = choose(said, window, budget)
    cut = len(said) - len(chosen.messages)
    return Conversation(chosen.messages, tuple(message_id for message_id, _, _ in kept[:cut]))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content or []
    )


async def stored_conversation(saver: Any, thread_id: str, checkpoint: str | None) -> list[Any]:
    """The messages of a thread's checkpoint (`checkpoint`, else its latest)."""
    if checkpoint is not None and checkpoint != threads.LATEST:
        # the turn's own start reads it again
        found = await saver.aread_for_start(thread_id, checkpoint)
    else:
        found = await saver.aget_tuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        )
    if found is None:
        return []
    return list(found.checkpoint.get("channel_values", {}).get("messages") or [])


# ---- finishing a turn -------------------------------------------------------------------------


async def finish_turn(
    db: Any,
    graph: Any,
    thread_id: str,
    run_id: str,
    inputs: JsonDict,
    outputs: JsonDict | None,
    reply_node: str,
    now: str,
) -> list[Write]:
    """What ends a finished turn, for the transaction that records the run's end: the checkpoint
    with the turn's reply appended (as if written by the graph's reply node), the turn's two rows
    of `messages`, the thread's new starting point, and the pruning of every other checkpoint."""
    config = {"configurable": {"thread_id": thread_id}}
    reply = threads.reply_text(outputs)
    with db.saver.held() as held:  # built here, committed by the caller with the run's new status
        saved = await graph.aupdate_state(
            config, {"messages": [AIMessage(reply, id=f"{run_id}.out")]}, as_node=reply_node
        )
    keep = saved["configurable"]["checkpoint_id"]
    said = messages.append_turn(thread_id, run_id, threads.turn_text(inputs), reply, now)
    return [
        *held,
        *db.saver.prune_writes(thread_id, keep),
        said,
        Write(
            "UPDATE threads SET checkpoint = ?, updated = ? WHERE id = ?", (keep, now, thread_id)
        ),
    ]
