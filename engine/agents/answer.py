"""The final answer of an agent: a call of the answer function, checked against the block's outputs.

The model is offered one more function next to its tools, `final_answer`, whose parameters are
the block's outputs. Models that answer in plain text instead still work: the text is read as
JSON (as for llm blocks), and a block with a single text output takes the text itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from engine.core.values import JsonDict
from engine.models.agentic import function_tool
from engine.models.structured import parse_json
from engine.nodes.errors import Problem
from engine.nodes.scope import check_outputs
from engine.spec import TypeSpec
from engine.spec.block import ANSWER_TOOL
from engine.spec.typecheck import outputs_schema


def answer_function(outputs: Mapping[str, TypeSpec]) -> JsonDict:
    """The function the model calls to finish, with the block's outputs as parameters."""
    return function_tool(
        ANSWER_TOOL,
        "Give your final answer and finish. Call it once, when you are done, "
        "alone (not together with other tools).",
        outputs_schema(outputs),
    )


@dataclass(frozen=True)
class Answer:
    """What one reply says about the final answer: `outputs` when it gave a valid one, else
    `problem` when it tried (or gave text), and `call_id` of the answer call if there was one."""

    outputs: JsonDict | None = None
    problem: str | None = None
    call_id: str | None = None

    @property
    def attempted(self) -> bool:
        return self.outputs is not None or self.problem is not None


def read_answer(message: AIMessage, outputs: Mapping[str, TypeSpec], text: str) -> Answer:
    """The answer in a reply: a call of final_answer, or a reply without tool calls (its text)."""
    calls = [call for call in message.tool_calls if call["name"] == ANSWER_TOOL]
    if calls:
        call = calls[0]
        return _checked(call.get("args") or {}, outputs, call.get("id"))
    if message.tool_calls or message.invalid_tool_calls:
        return Answer()  # tool calls and no answer: the loop goes on
    stripped = text.strip()
    if not stripped:
        return Answer(problem="the reply is empty")
    single = next(iter(outputs.items())) if len(outputs) == 1 else None
    try:
        value = parse_json(stripped)
    except ValueError as exc:
        if single is not None and single[1].type in ("string", "any"):
            return _checked({single[0]: stripped}, outputs, None)
        return Answer(problem=str(exc))
    if isinstance(value, dict) and value and set(value) <= set(outputs):
        return _checked(value, outputs, None)
    if single is not None and single[1].type in ("string", "any"):
        return _checked({single[0]: stripped}, outputs, None)
    return Answer(problem=f"the reply is not an object with the outputs {', '.join(outputs)}")


def _checked(value: Any, outputs: Mapping[str, TypeSpec], call_id: str | None) -> Answer:
    try:
        return Answer(outputs=check_outputs(outputs, value), call_id=call_id)
    except Problem as exc:
        return Answer(problem=str(exc), call_id=call_id)


def repair_note(problem: str) -> str:
    return (
        f"Your final answer was not accepted: {problem}. Call {ANSWER_TOOL} again with every output, each "
        "of its declared type."
    )
