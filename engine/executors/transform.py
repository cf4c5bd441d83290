"""transform blocks: each output is a Jinja2 expression over the inputs (no model, no I/O)."""

from __future__ import annotations

from engine.core.values import JsonDict
from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import Problem
from engine.spec import TransformBlock
from engine.templates.render import TemplateError, evaluate


def prepare(block: TransformBlock, where: str) -> Executor:
    compute = dict(block.compute)

    async def run(call: BlockCall) -> JsonDict:
        outputs: JsonDict = {}
        for name, expression in compute.items():
            try:
                outputs[name] = evaluate(expression, call.inputs)
            except TemplateError as exc:
                raise Problem(f"compute '{name}': {exc}") from None
        return outputs

    return run
