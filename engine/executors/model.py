"""llm and decide blocks: render the prompt with the inputs, ask the model for JSON matching the
block's outputs (structured output), return it. A decide block's one enum output picks a branch."""

from __future__ import annotations

from typing import Any

from engine.executors.memory import prompt_scope
from engine.models.base import StructuredRequest
from engine.nodes import history
from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import Problem, internal
from engine.nodes.events import TOKEN, emit
from engine.redaction import TokenMasker
from engine.spec import BlockSpec
from engine.templates import TemplateError, render_text
from engine.typecheck import outputs_schema
from engine.values import text_problem


def prepare(block: BlockSpec, where: str) -> Executor:
    if block.kind == "decide":
        decision_output(block, where)
    schema = outputs_schema(block.outputs)
    system = block.prompt.system if block.prompt is not None else None
    user = block.prompt.user if block.prompt is not None else None

    async def run(call: BlockCall) -> dict[str, Any]:
        scope = prompt_scope(call)
        tokens = TokenMasker(call.context.secrets, lambda text: emit(
            call.writer, TOKEN, call.label, {"text": text, "block": block.block}, call.index))
        request = StructuredRequest(
            flow=call.flow, step=call.step, block=block.block,
            system=_render("prompt.system", system, scope),
            user=_render("prompt.user", user, scope),
            output_schema=schema, inputs=call.inputs, on_token=tokens, history=history.for_call(call),
        )
        try:
            return await call.context.models.for_block(block).structured(request)
        finally:
            tokens.flush()  # a key split over pieces is masked whole: the last pieces wait for the end

    return run


def decision_output(block: BlockSpec, where: str) -> str:
    """The output a decide block branches on: its only output, which has an enum."""
    if len(block.outputs) != 1 or not next(iter(block.outputs.values())).enum:
        raise internal(f"{where}: decide block '{block.block}' without exactly one enum output", "BY353")
    return next(iter(block.outputs))


def _render(where: str, source: str | None, scope: dict[str, Any]) -> str | None:
    if source is None:
        return None
    try:
        text = render_text(source, scope)
    except TemplateError as exc:
        raise Problem(f"{where}: {exc}") from None
    problem = text_problem(text)  # e.g. a "\udcff" escape in a template: no provider can send it
    if problem is not None:
        raise Problem(f"{where}: the rendered text {problem}")
    return text
