"""A conversation thread's name: at most five words, given on its first turn.

With `threads: {name_model: PROFILE}` in blockyard.yaml the profile's model (at temperature 0.3)
is asked for "a concise title (five words or less) for: <the first message>" while the turn runs;
with no profile, or when that call fails or is slow, the name is the message's first five words.
Naming never fails a turn, and the turn never waits for it longer than NAME_WAIT after its own
work is done (engine/runtime/execution.py announces the name in a `thread_name` event).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from engine.models import StructuredRequest
from engine.spec import BlockSpec, ConfigSpec, TypeSpec
from engine.state.writer import Write
from engine.typecheck import outputs_schema

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
    line = re.sub(r"^(title\s*:\s*)", "", line, flags=re.IGNORECASE).strip().strip("\"'`*").rstrip(".").strip()
    words = line.split()
    return " ".join(words[:WORDS]) if words else None


def naming_block(config: ConfigSpec) -> BlockSpec | None:
    """The block a thread's name is asked for with, or None when no `threads.name_model` is set."""
    name = config.threads.name_model
    if name is None:
        return None
    profile = config.models.get(name)
    if profile is None:  # validate reports it (BY502); a pinned definition may be older than the check
        return None
    tuned = profile.model_copy(update={"temperature": TEMPERATURE})
    return BlockSpec(block="thread_name", kind="llm", model=tuned, outputs={"title": TypeSpec(type="string")})


async def model_name(models: Any, block: BlockSpec, flow: str, text: str) -> str | None:
    """The name the model gives a thread that starts with `text`; None when it gives none."""
    request = StructuredRequest(flow=flow, step="thread_name", block=block.block, system=None,
                                user=PROMPT.format(text[:_MESSAGE_LIMIT]), output_schema=outputs_schema(block.outputs),
                                inputs={"message": text[:_MESSAGE_LIMIT]})
    reply = await models.for_block(block).structured(request)
    return tidy(str(reply.get("title") or ""))


def set_name(thread_id: str, name: str) -> Write:
    return Write("UPDATE threads SET name = ? WHERE id = ?", (name, thread_id))
