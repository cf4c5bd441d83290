"""A conversation thread's name: at most five words, given on its first turn.

With `threads: {name_model: PROFILE}` in blockyard.yaml the profile's model (at temperature 0.3)
is asked for "a concise title (five words or less) for: <the first message>" while the turn runs;
with no profile, or when that call fails or is slow, the name is the message's first five words.
Naming never fails a turn, and the turn never waits for it longer than NAME_WAIT after its own
work is done (engine/runtime/execution.py announces the name in a `thread_name` event).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.core.usage import ModelCall, Spend
from engine.definitions.pinned import Bundle
from engine.models import StructuredRequest
from engine.spec import ConfigSpec, LlmBlock, PromptSpec, TypeSpec
from engine.spec.typecheck import outputs_schema
from engine.state import threads
from engine.state.store import RunRecord
from engine.state.writer import Write

log = logging.getLogger(__name__)

WORDS = 5
NAME_WAIT = 1.0  # seconds a finished turn waits for its thread's name before it takes the fallback
PROMPT = "a concise title (five words or less) for: {}"
TEMPERATURE = 0.3
_MESSAGE_LIMIT = 2000  # characters of the first message the naming model is sent


def fallback_name(text: str) -> str:
    """The first five words of a message (`(empty)` for a message without any)."""
    words = text.split()
    return " ".join(words[:WORDS]) or "(empty)"


def tidy(title: str) -> str | None:
    """A model's title as a name: one line, no quotes or final period, five words at most."""
    line = " ".join(title.split())
    line = (
        re.sub(r"^(title\s*:\s*)", "", line, flags=re.IGNORECASE)
        .strip()
        .strip("\"'`*")
        .rstrip(".")
        .strip()
    )
    words = line.split()
    return " ".join(words[:WORDS]) if words else None


def naming_block(config: ConfigSpec) -> LlmBlock | None:
    """The block a thread's name is asked for with, or None when no `threads.name_model` is set."""
    name = config.threads.name_model
    if name is None:
        return None
    profile = config.models.get(name)
    if profile is None:
        # validate reports it (BY502); a pinned definition may be older than the check
        return None
    tuned = profile.model_copy(update={"temperature": TEMPERATURE})
    return LlmBlock(
        block="thread_name",
        kind="llm",
        prompt=PromptSpec(user=PROMPT),  # said here; `model_name` sends it with the text filled in
        model=tuned,
        outputs={"title": TypeSpec(type="string")},
    )


async def model_name(models: Any, block: LlmBlock, flow: str, text: str) -> str | None:
    """The name the model gives a thread that starts with `text`; None when it gives none."""
    request = StructuredRequest(
        flow=flow,
        step="thread_name",
        block=block.block,
        system=None,
        user=PROMPT.format(text[:_MESSAGE_LIMIT]),
        output_schema=outputs_schema(block.outputs),
        inputs={"message": text[:_MESSAGE_LIMIT]},
        purpose="thread_name",
    )
    reply = await models.for_block(block).structured(request)
    return tidy(str(reply.get("title") or ""))


def set_name(thread_id: str, name: str) -> Write:
    return Write("UPDATE threads SET name = ? WHERE id = ?", (name, thread_id))


class NamingCalls:
    """The recorder of the naming model's calls (engine/models/calls.py): kept until the turn announces
    the name (they become model_call events then), and counted in the run's totals at once. A budget
    never refuses them: without a model's name the thread keeps its fallback name."""

    def __init__(self) -> None:
        self.made: list[ModelCall] = []
        self.spent: Spend | None = None

    def before(self, purpose: str) -> None:
        return None

    def after(self, call: ModelCall) -> None:
        self.made.append(call)
        if self.spent is not None:
            self.spent.add(call.as_data())


@dataclass
class Naming:
    """How a thread's first turn names it: `fallback` (stored already) unless `ask()` gives a name
    within NAME_WAIT of the turn's end; `store(name)` is the write that keeps a given name."""

    thread_id: str
    fallback: str
    ask: Callable[[], Awaitable[str | None]] | None = None
    store: Callable[[str], Write] | None = None
    task: asyncio.Future[str | None] | None = None
    announced: bool = False
    calls: NamingCalls = field(default_factory=NamingCalls)  # the naming model's calls

    def start(self) -> None:
        if self.ask is not None:
            self.task = asyncio.ensure_future(self.ask())

    def ready(self) -> bool:
        return not self.announced and (self.task is None or self.task.done())

    async def settle(self, wait: float) -> str:
        """The name: the model's when it has given one (waiting up to `wait`), else the fallback."""
        if self.task is None:
            return self.fallback
        try:
            name = (
                await asyncio.wait_for(asyncio.shield(self.task), wait)
                if not self.task.done()
                else self.task.result()
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a slow or failing naming model never fails the turn
            log.info(
                "thread %s: no name from the naming model (%s); using its first words",
                self.thread_id,
                type(exc).__name__ if isinstance(exc, TimeoutError) else exc,
            )
            self.cancel()
            return self.fallback
        return name or self.fallback

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


def first_turn(bundle: Bundle, record: RunRecord, models: Any) -> Naming:
    """How the first turn of a thread names it: by the naming profile's model, else its first words."""
    assert record.thread_id is not None
    said = threads.turn_text(record.inputs)
    block = naming_block(bundle.config)
    thread_id = record.thread_id
    if block is None:
        return Naming(thread_id, fallback_name(said))
    return Naming(
        thread_id,
        fallback_name(said),
        ask=lambda: model_name(models, block, bundle.name, said),
        store=lambda name: set_name(thread_id, name),
    )
