"""Each assertion kind passing and failing, with its exact message (docs/evals.md, "Assertions"), the
offline mock's judging rule, and how reports name assertions."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.usage import Spend
from engine.evals.assertions import check, label
from engine.models.mock_judge import judge_verdict
from engine.spec.evals import Assertion

OUTPUTS = {"greeting": "Hello Ada!", "words": 2, "tags": ["warm", "short"]}
DECLARED = ("greeting", "words", "tags")
SCOPE: dict[str, Any] = {
    "outputs": OUTPUTS,
    "inputs": {"name": "Ada"},
    "expected": "Hello Ada!",
    "usage": {"model_calls": 2, "tokens": 30, "cost_usd": 0.002, "latency_ms": 120.0},
}


def spend(*calls: tuple[int, int, float | None]) -> Spend:
    found = Spend()
    for inputs, outputs, cost in calls:
        found.add({"input_tokens": inputs, "output_tokens": outputs, "cost_usd": cost})
    return found


def run(
    written: dict[str, Any],
    *,
    used: Spend | None = None,
    latency_ms: float = 120.0,
    outputs: dict[str, Any] | None = None,
    declared: tuple[str, ...] = DECLARED,
) -> tuple[bool, str]:
    passed, why = check(
        Assertion.model_validate(written),
        OUTPUTS if outputs is None else outputs,
        declared,
        SCOPE,
        used or spend((10, 5, 0.001), (10, 5, 0.001)),
        latency_ms,
    )
    return passed, "" if passed else why


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ({"equals": "Hello Ada!", "output": "greeting"}, (True, "")),
        (
            {"equals": "Hello Bo!", "output": "greeting"},
            (False, 'output \'greeting\' is "Hello Ada!", expected "Hello Bo!"'),
        ),
        ({"equals": 2.0, "output": "words"}, (True, "")),
        ({"equals": True, "output": "words"}, (False, "output 'words' is 2, expected true")),
        ({"equals": ["warm", "short"], "output": "tags"}, (True, "")),
        (
            {"equals": {"greeting": "Hello Ada!"}},
            (
                False,
                'the outputs is {"greeting": "Hello Ada!", "words": 2, '
                '"tags": ["warm", "short"]}, expected {"greeting": '
                '"Hello Ada!"}',
            ),
        ),
        ({"contains": "Ada", "output": "greeting"}, (True, "")),
        (
            {"contains": ["Hello", "Bo", "Cy"], "output": "greeting"},
            (False, "output 'greeting' does not contain 'Bo', 'Cy': 'Hello Ada!'"),
        ),
        ({"contains": "warm", "output": "tags"}, (True, "")),  # a list is read as its JSON text
        (
            {"contains": "Ada", "output": "farewell"},
            (False, "output 'farewell' missing (outputs: greeting, words, tags)"),
        ),
        ({"regex": "^Hello [A-Z][a-z]+!$", "output": "greeting"}, (True, "")),
        (
            {"regex": "^Bye", "output": "greeting"},
            (False, "output 'greeting' does not match /^Bye/: 'Hello Ada!'"),
        ),
        (
            {"json_schema": {"type": "array", "items": {"type": "string"}}, "output": "tags"},
            (True, ""),
        ),
        (
            {"json_schema": {"type": "array", "maxItems": 1}, "output": "tags"},
            (False, "output 'tags' does not match the JSON Schema: ['warm', 'short'] is too long"),
        ),
        (
            {"json_schema": {"type": "object", "required": ["greeting", "mood"]}},
            (False, "the outputs does not match the JSON Schema: 'mood' is a required property"),
        ),
        ({"expr": "outputs.words == 2 and inputs.name in outputs.greeting"}, (True, "")),
        ({"expr": "outputs.greeting == expected and usage.tokens < 100"}, (True, "")),
        ({"expr": "outputs.words > 5"}, (False, "expr 'outputs.words > 5' is false")),
        (
            {"expr": "outputs.nothing.deeper"},
            (
                False,
                "expr 'outputs.nothing.deeper' cannot be evaluated: cannot evaluate 'outputs.nothing.deeper': "
                "'dict object' has no attribute 'nothing'",
            ),
        ),
        ({"max_cost_usd": 0.002}, (True, "")),
        ({"max_cost_usd": 0.0015}, (False, "cost $0.002000 is above max_cost_usd $0.001500")),
        ({"max_tokens": 30}, (True, "")),
        ({"max_tokens": 29}, (False, "30 tokens, above max_tokens 29")),
        ({"max_latency": "500ms"}, (True, "")),
        ({"max_latency": "100ms"}, (False, "latency 120 ms, above max_latency 100ms")),
    ],
)
def test_each_assertion_kind_passes_or_fails_with_its_message(
    written: dict[str, Any], expected: tuple[bool, str]
) -> None:
    assert run(written) == expected


def test_without_output_an_assertion_reads_the_only_output_else_all_of_them() -> None:
    assert run({"contains": "Ada"}, outputs={"greeting": "Hello Ada!"}, declared=("greeting",)) == (
        True,
        "",
    )
    assert run(
        {"equals": "Hello Bo!"}, outputs={"greeting": "Hello Ada!"}, declared=("greeting",)
    ) == (False, 'output \'greeting\' is "Hello Ada!", expected "Hello Bo!"')
    assert run({"contains": '"words": 2'}) == (
        True,
        "",
    )  # several outputs: all of them, as JSON text


def test_a_cost_limit_fails_when_a_call_has_no_price() -> None:
    assert run({"max_cost_usd": 1.0}, used=spend((10, 5, 0.001), (10, 5, None))) == (
        False,
        "cost unknown (1 of 2 model calls have no price; state `pricing:` in the profile), max_cost_usd $1.00",
    )


def test_assertions_are_named_by_their_name_or_their_kind_and_value() -> None:
    def named(written: dict[str, Any]) -> str:
        return label(Assertion.model_validate(written))

    assert named({"name": "greets by name", "contains": "Ada"}) == "greets by name"
    assert named({"contains": "Ada", "output": "greeting"}) == "contains 'Ada' (greeting)"
    assert named({"contains": ["a", "b"]}) == "contains 'a', 'b'"
    assert named({"equals": 2, "output": "words"}) == "equals 2 (words)"
    assert named({"json_schema": {"type": "string"}}) == "json_schema"
    assert named({"max_latency": "2s"}) == "max_latency 2s"
    assert named({"judge": {"rubric": "Friendly and short."}}) == "judge 'Friendly and short.'"


def test_the_mock_judges_by_the_terms_the_rubric_quotes() -> None:
    assert judge_verdict({"rubric": 'Names "Ada" and says "hello".', "output": "Hello Ada!"}) == {
        "reasoning": 'mock judge: the answer contains 2 of the 2 terms the rubric quotes ("Ada", "hello").',
        "score": 1.0,
    }
    assert judge_verdict(
        {"rubric": 'Names "Ada", "Bo" and "Cy".', "output": {"greeting": "Hi Bo"}}
    ) == {
        "reasoning": 'mock judge: the answer contains 1 of the 3 terms the rubric quotes ("Bo"); it lacks "Ada", '
        '"Cy".',
        "score": 0.3333,
    }
    assert judge_verdict({"rubric": "Friendly.", "output": "Hi"}) == {
        "reasoning": "mock judge: the rubric quotes no terms, and the answer is not empty.",
        "score": 1.0,
    }
    assert judge_verdict({"rubric": "Friendly.", "output": ""})["score"] == 0.0
