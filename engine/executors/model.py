"""llm and decide blocks: render the prompt with the inputs, ask the model for JSON matching the
block's outputs (structured output), return it. A decide block's one enum output picks a branch."""

from __future__ import annotations

from engine.core.redaction import TokenMasker
from engine.core.values import JsonDict
from engine.executors.memory import prompt_scope
from engine.models.base import StructuredRequest
from engine.nodes import history
from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import internal
from engine.nodes.events import TOKEN, emit
from engine.nodes.scope import render_prompt
from engine.spec import DecideBlock, LlmBlock
from engine.spec.typecheck import outputs_schema


def prepare(block: LlmBlock | DecideBlock, where: str) -> Executor:
    if isinstance(block, DecideBlock):
        decision_output(block, where)
    schema = outputs_schema(block.outputs)
    system, user = block.prompt.system, block.prompt.user

    async def run(call: BlockCall) -> JsonDict:
        scope = prompt_scope(call)
        tokens = TokenMasker(
            call.context.secrets,
            lambda text: emit(
                call.writer, TOKEN, call.label, {"text": text, "block": block.block}, call.index
            ),
        )
        request = StructuredRequest(
            flow=call.flow,
            step=call.step,
            block=block.block,
            system=render_prompt("prompt.system", system, scope),
            user=render_prompt("prompt.user", user, scope),
            output_schema=schema,
            inputs=call.inputs,
            on_token=tokens,
            history=history.for_call(call),
        )
        try:
            return await call.context.models.for_block(block).structured(request)
        finally:
            tokens.flush()  # a key split over pieces is masked whole: the last pieces wait for the end

    return run


def decision_output(block: DecideBlock, where: str) -> str:
    """The output a decide block branches on: its only output, which has an enum."""
    if len(block.outputs) != 1 or not next(iter(block.outputs.values())).enum:
        raise internal(
            f"{where}: decide block '{block.block}' without exactly one enum output", "BY353"
        )
    return next(iter(block.outputs))
