"""transform blocks: each output is a Jinja2 expression over the inputs (no model, no I/O)."""

from __future__ import annotations

from typing import Any

from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import CompileError, Problem
from engine.spec import BlockSpec
from engine.templates import TemplateError, evaluate


def prepare(block: BlockSpec, where: str) -> Executor:
    compute = dict(block.compute or {})
    unknown = [name for name in compute if name not in block.outputs]
    if unknown:
        raise CompileError(f"{where}: block '{block.block}' computes {', '.join(repr(n) for n in unknown)}, "
                           f"which {'is' if len(unknown) == 1 else 'are'} not among its outputs")
    missing = [name for name, spec in block.outputs.items() if name not in compute and not spec.has_default]
    if missing:
        raise CompileError(f"{where}: block '{block.block}' has no `compute` expression for output "
                           f"{', '.join(repr(n) for n in missing)}")

    async def run(call: BlockCall) -> dict[str, Any]:
        outputs: dict[str, Any] = {}
        for name, expression in compute.items():
            try:
                outputs[name] = evaluate(expression, call.inputs)
            except TemplateError as exc:
                raise Problem(f"compute '{name}': {exc}") from None
        return outputs

    return run
