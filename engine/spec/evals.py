"""The format of eval files (`evals/*.yaml`, run by `blockyard eval`: engine/evals, docs/evals.md); its
JSON Schema is published with the others (engine/spec/export.py, schemas/eval.schema.json).

```yaml
eval: greetings
flow: hello                       # or `block: greet` (the block alone, as a one-step flow)
dataset: data/greetings.jsonl     # optional: more cases, from a JSONL, CSV or YAML file of the yard
assert:                           # checked on every case
  - contains: Ada
    output: greeting
  - judge: {rubric: 'The greeting is friendly and names "Ada".', model: judge}
cases:
  - inputs: {name: Ada}
    assert: [{max_cost_usd: 0.01}]  # this case's own, after the defaults
thresholds: {pass_rate: 0.9, mean_score: 0.8}
```

What an assertion checks, and how each kind is written, is one mapping with exactly one kind key
(`ASSERTION_KINDS`); `blockyard validate` says so when it has none or several (BY880).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.core.values import JsonDict
from engine.spec.common import Duration, Name, Spec, empty_dict, empty_list

# the keys that say what an assertion checks, in the order they are documented
ASSERTION_KINDS = (
    "equals",
    "contains",
    "regex",
    "json_schema",
    "expr",
    "judge",
    "max_cost_usd",
    "max_tokens",
    "max_latency",
)
# the suffixes of dataset files, by format
DATASET_FORMATS = {
    ".jsonl": "jsonl",
    ".csv": "csv",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "yaml",
}


class JudgeSpec(Spec):
    """An LLM as judge: a model profile scores the case's outputs against a rubric, 0 to 1, with its reasons."""

    rubric: str = Field(
        ...,
        min_length=1,
        description="What a good answer is: the judge scores the outputs "
        "against it (the inputs and `expected` are shown too).",
    )
    model: Name | None = Field(
        None,
        description="The model profile of blockyard.yaml that judges "
        "(default: the `default` profile).",
    )
    threshold: float = Field(
        0.5, ge=0, le=1, description="The score at or above which the assertion passes."
    )


class Assertion(Spec):
    """One check of a case's result; exactly one of the kind keys is given."""

    name: str | None = Field(
        None, description="How reports name the assertion (default: its kind and value)."
    )
    output: str | None = Field(
        None,
        description="The output it looks at (default: the flow's only output, "
        "else all outputs as one JSON object).",
    )
    equals: Any = Field(
        None,
        description="The output equals this value (text compares exactly; "
        "numbers, lists and mappings as JSON values).",
    )
    contains: str | list[str] | None = Field(
        None,
        description="The output's text contains this text (each of these texts), case-sensitive.",
    )
    regex: str | None = Field(
        None,
        description="An RE2 regular expression that must match somewhere in the output's text.",
    )
    json_schema: JsonDict | None = Field(
        None, description="A JSON Schema (draft 2020-12) the output must match."
    )
    expr: str | None = Field(
        None,
        description="A bare template expression, like a router's `expr`, that must "
        "be true; it sees `outputs`, `inputs`, `expected` and `usage` "
        "(model_calls, tokens, cost_usd, latency_ms).",
    )
    judge: JudgeSpec | None = Field(
        None, description="An LLM judge's score must reach its threshold."
    )
    max_cost_usd: float | None = Field(
        None,
        ge=0,
        description="The case's model calls cost at most this "
        "many US dollars (an unknown price fails).",
    )
    max_tokens: int | None = Field(
        None,
        ge=0,
        description="The case's model calls use at most this many input plus output tokens.",
    )
    max_latency: Duration | None = Field(
        None, description="The case takes at most this long, e.g. 2s."
    )

    @property
    def kinds(self) -> list[str]:
        """The kind keys given (exactly one in a valid file)."""
        return [kind for kind in ASSERTION_KINDS if kind in self.model_fields_set]

    @property
    def kind(self) -> str:
        kinds = self.kinds
        return kinds[0] if kinds else "none"


class Case(Spec):
    """One case: a run of the flow (after the turns of its `history`), and what must hold of its result."""

    name: str | None = Field(
        None,
        description="How reports name the case (default: `case N`, or the dataset file and line).",
    )
    inputs: JsonDict = Field(default_factory=empty_dict, description="The run's inputs.")
    history: list[JsonDict | str] = Field(
        default_factory=empty_list,
        description="Earlier turns of a conversation: each the inputs of a turn (or just its `message`), run "
        "first as turns of one new thread; the case is the turn after them.",
    )
    expected: Any = Field(
        None, description="A reference answer: `expected` in `expr`, and shown to judges."
    )
    assert_: list[Assertion] = Field(
        default_factory=empty_list,
        alias="assert",
        description="This case's assertions, checked after the eval's own.",
    )


class Thresholds(Spec):
    """What the whole eval must reach; without `thresholds:` every case must pass."""

    pass_rate: float | None = Field(
        None, ge=0, le=1, description="The share of cases that pass, 0 to 1."
    )
    mean_score: float | None = Field(
        None,
        ge=0,
        le=1,
        description="The mean of the cases' scores, 0 to 1 "
        "(a case's score: the mean of its "
        "assertions', a judge's its own).",
    )


class EvalSpec(Spec):
    """An eval file: which flow or block, its cases, what must hold of each, and of the whole."""

    eval_: Name = Field(..., alias="eval", description="The eval's name (unique in the yard).")
    description: str | None = Field(None, description="What the eval measures.")
    flow: Name | None = Field(None, description="The flow evaluated.")
    block: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_-]*(@[0-9]+)?$",
        description="Instead of a flow: the block evaluated alone (`name` or `name@2`), "
        "its inputs and outputs the case's.",
    )
    dataset: str | None = Field(
        None,
        description="A file of more cases, relative to this file: JSONL or YAML "
        "(each a case: inputs, history, expected, assert), or CSV (each "
        "column an input, `expected` the reference answer).",
    )
    cases: list[Case] = Field(
        default_factory=empty_list, description="The cases, after the dataset's."
    )
    assert_: list[Assertion] = Field(
        default_factory=empty_list, alias="assert", description="Assertions checked on every case."
    )
    thresholds: Thresholds | None = Field(
        None, description="What the whole eval must reach (default: every case passes)."
    )

    @property
    def name(self) -> str:
        return self.eval_

    @property
    def target(self) -> str:
        """`flow NAME` or `block NAME`, as reports say it."""
        return f"flow {self.flow}" if self.flow is not None else f"block {self.block}"
