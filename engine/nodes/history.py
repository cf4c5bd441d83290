"""What a model call in a conversation thread's turn is sent of the conversation so far.

The run context carries the thread's conversation before this turn (`RunContext.conversation`:
(role, text) pairs, oldest first, two per finished turn; None when the run is not a thread turn).
A block takes its last `history:` turns of it (engine/spec/block.py), then the oldest turns go
until what is left fits the yard's `threads.history_chars`; the step says so in a `warning` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from engine.nodes.call import BlockCall
from engine.nodes.events import warning
from engine.spec import ModelBlock

Said = tuple[str, str]  # (role: user | assistant, text)


@dataclass(frozen=True)
class Chosen:
    """The messages a call is sent, and how many of the turns it was given the budget left out."""

    messages: tuple[Said, ...]
    dropped: int = 0


def turns_of(conversation: Sequence[Said]) -> list[tuple[Said, ...]]:
    """The conversation cut into turns: a user message and what answered it."""
    turns: list[list[Said]] = []
    for said in conversation:
        if said[0] == "user" or not turns:
            turns.append([])
        turns[-1].append(said)
    return [tuple(turn) for turn in turns]


def choose(conversation: Sequence[Said] | None, last: int | None, budget: int) -> Chosen:
    """The last `last` turns (all with None) that fit in `budget` characters, oldest first."""
    if not conversation or last == 0:
        return Chosen(())
    turns = turns_of(conversation)
    if last is not None:
        turns = turns[-last:]
    kept: list[tuple[Said, ...]] = []
    used = 0
    for turn in reversed(turns):  # the newest turns are the last to go
        size = sum(len(text) for _, text in turn)
        if used + size > budget:
            break
        kept.append(turn)
        used += size
    kept.reverse()
    return Chosen(tuple(said for turn in kept for said in turn), len(turns) - len(kept))


def for_call(call: BlockCall) -> tuple[Said, ...]:
    """What `call`'s block is sent of the conversation; a `warning` event when the budget cut it."""
    context = call.context
    conversation = getattr(context, "conversation", None)
    if conversation is None:
        return ()
    budget = getattr(context, "history_chars", 100_000)
    if not isinstance(call.block, ModelBlock):
        return ()  # only a model is sent the conversation
    wanted = call.block.history_turns
    chosen = choose(conversation, wanted, budget)
    # the turns the block asks for that are not sent: the checkpoint keeps only what fits the budget
    # (older turns are in the messages table only), and this call's choice may cut more
    before = getattr(context, "turns_before", 0)
    dropped = (before if wanted is None else min(wanted, before)) - len(turns_of(chosen.messages))
    if dropped > 0:
        warning(
            call.writer,
            call.label,
            "history_cut",
            f"the conversation is longer than threads.history_chars ({budget} characters): the oldest "
            f"{dropped} turn{'s' if dropped != 1 else ''} asked for {'were' if dropped != 1 else 'was'} left "
            "out of what the model is sent",
            block=call.block.block,
            dropped_turns=dropped,
            **({"index": call.index} if call.index is not None else {}),
        )
    return chosen.messages


def as_messages(history: Sequence[Said]) -> list[Any]:
    """LangChain chat messages of `history` (for agents and chat providers)."""
    return [HumanMessage(text) if role == "user" else AIMessage(text) for role, text in history]
