"""Messages as LangChain's message dicts, and a chat UI's `{"messages": [...]}` input as a flow's inputs.

A thread's conversation comes from the messages table (engine/state/messages.py): each finished turn is a
human message and an AI message, with ids made from the turn's run id, so the ids a stream gives the reply
while it is written are the ids the thread's state shows afterwards.

An AI message's `usage_metadata` (LangChain's shape) is what its turn's model calls used: a turn's reply carries
the totals of the turn's run over all its executions (the `runs` row, or its `model_call` events as a stream
goes), a step's streamed message the model calls of that step; None when no model was called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.core.usage import SPEND_KEYS, Spend
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.serve.problems import ApiError
from engine.state.messages import Message

HUMAN_TYPES = ("human", "user")


def human_id(run_id: str) -> str:
    return f"{run_id}-human"


def ai_id(run_id: str) -> str:
    return f"{run_id}-ai"


def human(content: str, message_id: str) -> JsonDict:
    return {
        "type": "human",
        "content": content,
        "id": message_id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "example": False,
    }


def ai(content: str, message_id: str, chunk: bool = False, usage: Spend | None = None) -> JsonDict:
    return {
        "type": "AIMessageChunk" if chunk else "ai",
        "content": content,
        "id": message_id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "example": False,
        "tool_calls": [],
        "invalid_tool_calls": [],
        "usage_metadata": usage_metadata(usage),
        **({"tool_call_chunks": []} if chunk else {}),
    }


def usage_metadata(spend: Spend | None) -> JsonDict | None:
    """Model calls' totals as LangChain's `UsageMetadata`; None without model calls (a turn that called no
    model, a turn recorded before usage was)."""
    if spend is None or spend.model_calls == 0:
        return None
    return {
        "input_tokens": spend.input_tokens,
        "output_tokens": spend.output_tokens,
        "total_tokens": spend.tokens,
        "input_token_details": {"cache_read": spend.cached_tokens},
        "output_token_details": {"reasoning": spend.reasoning_tokens},
    }


def spend_of(record: object) -> Spend:
    """The totals a run record (`RunRecord`) or a run's JSON carries."""
    if isinstance(record, Mapping):
        return Spend.of(record)
    return Spend.of({key: getattr(record, key, None) for key in SPEND_KEYS})


def from_row(message: Message, usage: Spend | None = None) -> JsonDict:
    """One row of the messages table as a LangChain message; `usage`: what the turn of an AI message spent."""
    if message.role == "user":
        return human(message.content, human_id(message.run_id))
    return ai(message.content, ai_id(message.run_id), usage=usage)


def message_input(bundle: Bundle) -> str | None:
    """The input a conversation's message goes to: `message`, else the flow's only string input; None when the
    flow has neither."""
    inputs = bundle.flow.inputs
    if "message" in inputs:
        return "message"
    texts = [name for name, spec in inputs.items() if spec.type == "string"]
    return texts[0] if len(texts) == 1 else None


def text_of(content: Any) -> str | None:
    """The text of a message's content: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part if isinstance(part, str) else part.get("text")
            for part in content
            if isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
        ]
        return "".join(part for part in parts if isinstance(part, str))
    return None


def run_inputs(bundle: Bundle, given: Mapping[str, Any] | None) -> JsonDict:
    """A run's input as the flow's inputs: `messages` (a chat UI's input) becomes the flow's message input — the
    content of the last human message; every other key is an input of the flow as it is."""
    inputs = dict(given or {})
    if "messages" not in inputs:
        return inputs
    sent = inputs.pop("messages")
    target = message_input(bundle)
    if target is None:
        raise ApiError(
            422,
            "invalid_request",
            f"flow '{bundle.name}' takes no message (it has no `message` input "
            "and not exactly one text input): send its inputs instead of "
            "`messages`",
            field="input.messages",
        )
    if isinstance(sent, dict):
        sent = [sent]
    if not isinstance(sent, list):
        raise ApiError(
            422,
            "invalid_request",
            "input.messages: must be a list of messages",
            field="input.messages",
        )
    said = None
    for message in reversed(sent):
        if isinstance(message, dict) and message.get("type", message.get("role")) in HUMAN_TYPES:
            said = text_of(message.get("content"))
            break
        if isinstance(message, str):
            said = message
            break
    if said is None:
        raise ApiError(
            422,
            "invalid_request",
            "input.messages: holds no human message with text content",
            field="input.messages",
        )
    if target in inputs:
        raise ApiError(
            422,
            "invalid_request",
            f"input: give `messages` or `{target}`, not both",
            field=f"input.{target}",
        )
    inputs[target] = said
    return inputs
