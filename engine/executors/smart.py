"""smart blocks: a DSPy program built from the block's inputs and outputs (engine/smart).

Needs the optional `dspy` extra: without it the block fails to compile, naming the
extra. `program` is the compiled program `blockyard optimize` saved next to the block (the
bundle carries it, so a run keeps the program it started with). With `guardrails`, a prediction
that breaks them is made again (DSPy's BestOfN, up to `attempts`), and the step fails when none
passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from engine.core.values import JsonDict, text_problem
from engine.models import calls
from engine.models.providers.mock import MockGenerator
from engine.nodes import history
from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import CompileError, Problem
from engine.smart import dspy_installed, import_dspy, needs_dspy
from engine.smart.lm import lm_for, model_failure
from engine.smart.metering import calls_since
from engine.smart.program import HISTORY_FIELD, guardrail_problem, history_text, module, outputs_of
from engine.spec import SmartBlock
from engine.templates.render import TemplateError, render_text


def prepare(block: SmartBlock, where: str, *, program: Mapping[str, Any] | None = None) -> Executor:
    """The block's executor. DSPy (~1 s of CPU to import) is loaded at the first prediction, except for a
    block with a compiled program: that is loaded here, so that one which does not fit fails the compile,
    not a run. Without one, the module is built from names validation has checked (BY359)."""
    if not dspy_installed():
        raise CompileError(
            f"{where}: " + needs_dspy(f"block '{block.block}' is a smart block, which")
        )
    if program is not None:
        try:
            module(block, program=program)
        except Exception as exc:
            raise CompileError(
                f"{where}: the compiled program of smart block '{block.block}' does not fit it "
                f"(run `blockyard optimize {block.block}` again): {type(exc).__name__}: {exc}"
            ) from None
    saved = dict(program) if program is not None else None

    async def run(call: BlockCall) -> JsonDict:
        instructions = _instructions(block, call.inputs)
        said = history.for_call(call)
        lm, key = lm_for(
            call.context.models,
            block,
            flow=call.flow,
            step=call.step,
            inputs=call.inputs,
            history=said,
        )
        where_call = f"flow '{call.flow}', step '{call.step}'"
        recorder = calls.current()
        if recorder is not None:
            # a budget spent refuses the prediction (DSPy's calls are its own)
            recorder.before("smart")
        seen, began = len(getattr(lm, "history", None) or []), time.time()
        try:
            return await asyncio.to_thread(
                _predict, block, instructions, saved, lm, call.inputs, said
            )
        except Problem:
            raise
        except Exception as exc:
            raise model_failure(exc, where_call, key) from None
        finally:
            if recorder is not None:
                _report(recorder, call, lm, seen, began)

    return run


def _report(
    recorder: calls.CallRecorder, call: BlockCall, lm: Any, seen: int, began: float
) -> None:
    """The prediction's model calls, told to the step's recorder (which may fail the step: a budget)."""
    models: Any = call.context.models
    profile, spec = models.profile(call.block)
    metered = models.agent_for_block(call.block)
    provider = (
        "mock" if isinstance(getattr(metered, "inner", metered), MockGenerator) else spec.provider
    )
    for model_call in calls_since(
        lm,
        seen,
        began,
        provider=provider,
        model=str(getattr(metered, "model", "")),
        profile=profile,
        block=call.block.block,
        price=getattr(metered, "price", None),
    ):
        recorder.after(model_call)


def _predict(
    block: SmartBlock,
    instructions: str | None,
    program: JsonDict | None,
    lm: Any,
    inputs: JsonDict,
    said: tuple[tuple[str, str], ...] = (),
) -> JsonDict:
    """One prediction (several under guardrails), in a worker thread: DSPy's calls are blocking.
    In a thread's turn the conversation so far goes in as one more input field."""
    dspy: Any = import_dspy()
    given = bool(said) and HISTORY_FIELD not in block.inputs
    predictor = module(block, instructions, program, history=given)
    if given:
        inputs = {HISTORY_FIELD: history_text(said), **inputs}
    rails = block.guardrails
    with dspy.context(lm=lm):
        if rails is None:
            return outputs_of(block, predictor(**inputs))

        def reward(args: dict[str, Any], prediction: Any) -> float:
            return 0.0 if guardrail_problem(block, outputs_of(block, prediction)) else 1.0

        best = dspy.BestOfN(module=predictor, N=rails.attempts, reward_fn=reward, threshold=1.0)
        outputs = outputs_of(block, best(**inputs))
    problem = guardrail_problem(block, outputs)
    if problem is not None:
        raise Problem(
            f"guardrail {problem} (after {rails.attempts} attempt{'s' if rails.attempts > 1 else ''})"
        )
    return outputs


def _instructions(block: SmartBlock, inputs: JsonDict) -> str | None:
    """The block's description and rendered prompt, or None to keep the program's instructions."""
    if block.prompt is None:
        return None
    parts = [block.description or ""]
    for where, source in (
        ("prompt.system", block.prompt.system),
        ("prompt.user", block.prompt.user),
    ):
        if source:
            try:
                text = render_text(source, inputs)
            except TemplateError as exc:
                raise Problem(f"{where}: {exc}") from None
            problem = text_problem(text)
            if problem is not None:
                raise Problem(f"{where}: the rendered text {problem}")
            parts.append(text)
    return "\n\n".join(part for part in parts if part) or None
