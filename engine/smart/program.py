"""A smart block as a DSPy program: its signature, its module, its guardrails.

The signature's input fields are the block's inputs, its output fields the outputs (types and
descriptions carried over: integer -> int, array -> list[...], enum -> Literal[...]); its
instructions are the block's description and prompt. `mode: chain_of_thought` adds DSPy's
reasoning field before the outputs. A compiled program (what `blockyard optimize` saved) is
loaded over the fresh module: its demos and instructions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from engine.core.values import JsonDict
from engine.nodes.errors import Problem
from engine.nodes.scope import check_outputs
from engine.smart import import_dspy
from engine.spec import SmartBlock, TypeSpec

REASONING = "reasoning"  # the field DSPy's ChainOfThought adds
# in a conversation thread's turn, the conversation so far as one text input field: DSPy's own
# `dspy.History` field replays earlier calls of the same signature, not a chat of free text
HISTORY_FIELD = "conversation_history"


def python_type(spec: TypeSpec) -> Any:
    """The Python type DSPy parses a value of `spec` into."""
    if spec.enum:
        return Literal[tuple(spec.enum)]
    simple: dict[str, Any] = {
        "string": str,
        "integer": int,
        "number": float,
        "boolean": bool,
        "object": dict[str, Any],
        "any": Any,
    }
    if spec.type == "array":
        return list[python_type(spec.items)] if spec.items is not None else list[Any]  # type: ignore[misc]
    return simple[spec.type]


def signature(block: SmartBlock, instructions: str | None = None, *, history: bool = False) -> Any:
    """The DSPy signature of a block (with `history`, a first input field for the conversation so far)."""
    dspy: Any = import_dspy()
    fields: dict[str, tuple[Any, Any]] = {}
    if history:
        fields[HISTORY_FIELD] = (
            str,
            dspy.InputField(
                desc="The conversation so far, oldest first (user: ... / assistant: ... lines)."
            ),
        )
    for name, spec in block.inputs.items():
        fields[name] = (python_type(spec), dspy.InputField(desc=spec.description or ""))
    for name, spec in block.outputs.items():
        fields[name] = (python_type(spec), dspy.OutputField(desc=spec.description or ""))
    return dspy.make_signature(fields, instructions or default_instructions(block))


def default_instructions(block: SmartBlock) -> str:
    return (
        block.description
        or f"Produce {', '.join(block.outputs)} from {', '.join(block.inputs) or 'nothing'}."
    )


def module(
    block: SmartBlock,
    instructions: str | None = None,
    program: Mapping[str, Any] | None = None,
    *,
    history: bool = False,
) -> Any:
    """A fresh DSPy module for the block, with a compiled program's state loaded when given."""
    dspy: Any = import_dspy()
    sig = signature(block, instructions, history=history)
    built = dspy.ChainOfThought(sig) if block.mode == "chain_of_thought" else dspy.Predict(sig)
    if program is not None:
        built.load_state(dict(program))
        if instructions is not None:  # the prompt of this call wins over the saved instructions
            for predictor in built.predictors():
                predictor.signature = predictor.signature.with_instructions(instructions)
    return built


def history_text(history: Any) -> str:
    """The conversation so far as the text of the history field."""
    return "\n".join(f"{role}: {text}" for role, text in history)


def saved_state(program: Any) -> JsonDict:
    """A compiled module's state, fit to save next to the block: no language model settings (which
    could hold a key), only what the program learned."""
    state = dict(program.dump_state())
    for part in [
        state,
        *state.values(),
    ]:  # Predict keeps its state at the top, ChainOfThought under `predict`
        if isinstance(part, dict) and "lm" in part:
            part["lm"] = None
    return state


def outputs_of(block: SmartBlock, prediction: Any) -> JsonDict:
    """The block's outputs out of a prediction (the reasoning field is not an output)."""
    values = dict(prediction.items()) if hasattr(prediction, "items") else dict(prediction)
    return {name: values[name] for name in block.outputs if name in values}


def guardrail_problem(block: SmartBlock, outputs: Mapping[str, Any]) -> str | None:
    """What breaks the block's guardrails in these outputs, or None."""
    rails = block.guardrails
    if rails is None:
        return None
    if rails.shape:
        try:
            check_outputs(block.outputs, dict(outputs))
        except Problem as exc:
            return f"JSON shape: {exc}"
    if rails.max_length is not None:
        for name, value in outputs.items():
            if isinstance(value, str) and len(value) > rails.max_length:
                return f"max_length: output '{name}' has {len(value)} characters, more than {rails.max_length}"
    return None
