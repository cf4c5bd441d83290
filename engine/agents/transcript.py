"""Messages of an agent's conversation: fresh ids, tool results as text, the prompt.

Every message gets an id of our own before it enters a state: providers reuse theirs (an
OpenAI-compatible server may answer every request with the same completion id), and the
`messages` reducer replaces a message whose id it has seen.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

RESULT_LIMIT = 16_000  # characters of a tool result shown to the model


def new_id() -> str:
    return uuid.uuid4().hex


def stamped(message: BaseMessage, *, name: str | None = None) -> BaseMessage:
    """`message` with a fresh id (and `name`: which step spoke, in the run's shared log)."""
    update: dict[str, Any] = {"id": new_id()}
    if name is not None and isinstance(message, AIMessage):
        update["name"] = name
    return message.model_copy(update=update)


HISTORY = "history."  # id prefix of the conversation a thread's turn starts the agent with


def prompt(
    system: str | None, user: str, history: tuple[tuple[str, str], ...] = ()
) -> list[BaseMessage]:
    """system, the conversation so far (a thread's earlier turns, oldest first), then the user prompt."""
    messages: list[BaseMessage] = []
    if system:
        messages.append(SystemMessage(system, id=new_id()))
    for role, text in history:
        said = (
            HumanMessage(text, id=HISTORY + new_id())
            if role == "user"
            else AIMessage(text, id=HISTORY + new_id())
        )
        messages.append(said)
    messages.append(HumanMessage(user, id=new_id()))
    return messages


def own(message: BaseMessage) -> bool:
    """Whether a message of the agent's loop is its own (not the system prompt, not the conversation
    it was given): only those go to the run's transcript."""
    return message.type != "system" and not str(message.id or "").startswith(HISTORY)


def note(text: str) -> HumanMessage:
    """A message of the engine to the model (a rejected answer, the last turn)."""
    return HumanMessage(text, id=new_id())


def result_text(value: Any) -> str:
    """A tool's result as the text of a tool message: strings as they are, the rest as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > RESULT_LIMIT:
        text = text[:RESULT_LIMIT] + f"... [cut: the result has {len(text)} characters]"
    return text


def tool_result(
    call_id: str, name: str, value: Any = None, *, error: str | None = None
) -> ToolMessage:
    """The answer to one tool call: its result, or an error the model can act on."""
    if error is not None:
        return ToolMessage(
            f"error: {error}", tool_call_id=call_id, name=name, status="error", id=new_id()
        )
    return ToolMessage(result_text(value), tool_call_id=call_id, name=name, id=new_id())


def text_of(message: BaseMessage) -> str:
    """The plain text of a message (content blocks joined)."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "") if isinstance(block, dict) else str(block) for block in content
    )
