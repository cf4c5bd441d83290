"""What an agent asks of a model in one turn of its loop, and what a provider implements for it.

An agent turn is a plain chat call with tools: the conversation so far goes in, one assistant
message comes out — text, tool calls, or a call of the answer function whose parameters are the
block's outputs. Providers return LangChain `AIMessage`s (tool calls parsed into `tool_calls`,
arguments that are not JSON into `invalid_tool_calls`); the agent loop in engine/agents does
the rest. `on_token` receives text as it is generated when the provider streams.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.core.values import JsonDict

TokenSink = Callable[[str], None]


@dataclass(frozen=True)
class TurnRequest:
    """One model turn of an agent: where it runs, the conversation, and what it may call."""

    flow: str
    step: str
    block: str
    messages: tuple[Any, ...]  # LangChain messages, oldest first
    tools: tuple[JsonDict, ...]  # OpenAI-style function tools, the answer function included
    answer_tool: str  # the function whose arguments are the final answer
    answer_schema: JsonDict = field(repr=False)
    # the block's inputs (the mock's seed)
    inputs: JsonDict = field(default_factory=dict, repr=False)
    turn: int = 1
    force_answer: bool = False  # the last turn: the model must call the answer function


class AgentModel(Protocol):
    """A provider that can run agent turns (every provider: openai, azure, anthropic, mock)."""

    provider: str
    model: str

    async def turn(self, request: TurnRequest, on_token: TokenSink | None = None) -> Any:
        """The assistant's reply (an AIMessage); ModelError when the call fails."""
        ...


def function_tool(name: str, description: str, parameters: JsonDict) -> JsonDict:
    """A tool in the OpenAI function format, which every LangChain chat model binds."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
