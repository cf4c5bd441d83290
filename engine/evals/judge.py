"""LLM as judge: a model profile scores a case's outputs against a rubric, 0 to 1, and says why.

A judge is a structured model call like a block's (`purpose: judge`), through the same path: the
profile's provider measured and priced (engine/models/calls.py), its reply validated and repaired once,
kept by the response cache. Its calls are recorded apart from the flow's (the case's `judge_spend`), so
that a case's cost and its `max_cost_usd` are the flow's alone. Judges use the profiles of the working
tree's blockyard.yaml on both sides of `--base`: the same judge scores base and head. The offline mock
judges by a rule (engine/models/mock_judge.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.core.errors import BlockyardError
from engine.core.usage import ModelCall, Spend
from engine.core.values import JsonDict
from engine.evals.results import Check
from engine.models.base import StructuredRequest
from engine.models.calls import recording
from engine.models.resolver import ModelResolver
from engine.spec.evals import JudgeSpec

SYSTEM = (
    "You are an impartial evaluator. Read the rubric, the inputs the answer was given, the reference "
    "answer when there is one, and the answer. Judge only how well the answer meets the rubric. Give "
    "your reasoning in one to three sentences, then a score from 0 (does not meet it at all) to 1 "
    "(meets it fully)."
)
VERDICT_SCHEMA: JsonDict = {
    "type": "object",
    "properties": {
        "reasoning": {
            "type": "string",
            "description": "Why the answer earns its score, in one to three sentences.",
        },
        "score": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "How well the answer meets the rubric: 0 not at all, 1 fully.",
        },
    },
    "required": ["reasoning", "score"],
    "additionalProperties": False,
}


class JudgeCalls:
    """The call recorder of one judge (engine/models/calls.py): its spend, and what the cache answered."""

    def __init__(self) -> None:
        self.spend = Spend()
        self.cached = 0
        self.saved_usd = 0.0

    def before(self, purpose: str) -> None:
        """A judge has no budget."""

    def after(self, call: ModelCall) -> None:
        data = call.as_data()
        self.spend.add(data)
        if data.get("cached"):
            self.cached += 1
            self.saved_usd += float(data.get("cost_usd") or 0.0)


def request(
    judge: JudgeSpec,
    eval_name: str,
    case: str,
    inputs: Mapping[str, Any],
    expected: Any,
    output: Any,
) -> StructuredRequest:
    """The judge's request: the rubric, the case's inputs, its reference answer, and the answer."""
    parts = [f"Rubric:\n{judge.rubric}", f"Inputs:\n{_text(dict(inputs))}"]
    if expected is not None:
        parts.append(f"Reference answer:\n{_text(expected)}")
    parts.append(f"Answer:\n{_text(output)}")
    return StructuredRequest(
        flow=eval_name,
        step=case,
        block="judge",
        system=SYSTEM,
        user="\n\n".join(parts),
        output_schema=VERDICT_SCHEMA,
        purpose="judge",
        inputs={
            "rubric": judge.rubric,
            "inputs": dict(inputs),
            "expected": expected,
            "output": output,
        },
    )


async def judge(
    models: ModelResolver,
    spec: JudgeSpec,
    label: str,
    eval_name: str,
    case: str,
    inputs: Mapping[str, Any],
    expected: Any,
    output: Any,
    calls: JudgeCalls,
) -> Check:
    """Score one case's output; a judge that fails (its model, its reply) fails the assertion with why."""
    asked = request(spec, eval_name, case, inputs, expected, output)
    try:
        with recording(calls):
            verdict = await models.for_profile(spec.model).structured(asked)
    except BlockyardError as exc:
        return Check("judge", label, False, 0.0, f"the judge failed: {exc}")
    score = float(verdict.get("score", 0.0))
    reasoning = str(verdict.get("reasoning", "")).strip()
    passed = score >= spec.threshold
    message = (
        "" if passed else f"the judge scored {score:.2f}, below its threshold {spec.threshold:.2f}"
    )
    return Check("judge", label, passed, score, message, reasoning)


def _text(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, indent=2, default=str)
    )
