"""BY870, BY871, BY817: what `blockyard validate` says about a flow's budget before anything runs
(docs/observability.md, "Budgets"): the worst case of a run against the limits, flows without a
bound, and the policy that requires a budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.compile.foreach import MAX_ITEMS
from engine.definitions.project import load_project
from engine.validate import semantic
from engine.validate.command import validate_command
from engine.validate.semantic.budgets import FOREACH_ITEMS, literal_items

MakeYard = Callable[[dict[str, str]], Path]

CONFIG = """\
models:
  default: {provider: mock, max_tokens: 500}
"""

WRITER = """\
block: writer
kind: agent
max_iterations: 8
inputs: {topic: {type: string}}
outputs: {text: {type: string}}
prompt: {user: "Write about {{ topic }}."}
"""

JUDGE = """\
block: judge
kind: llm
inputs: {text: {type: string}}
outputs: {score: {type: integer}}
prompt: {user: "Score {{ text }}."}
"""

LEAD = """\
block: lead
kind: agent
delegates: [writer]
inputs: {topic: {type: string}}
outputs: {text: {type: string}}
prompt: {user: "Get {{ topic }} written."}
"""

REFINE = """\
flow: refine
inputs: {topic: {type: string}}
outputs: [text]
budget:
  model_calls: 100
  wall_time: 10m
steps:
  - id: refine
    loop:
      max_iterations: 10
      until: "context.score >= 8"
      steps:
        - id: write
          uses: writer
          with: {topic: "{{ inputs.topic }}"}
        - id: judge
          uses: judge
          with: {text: "{{ context.text }}"}
"""

FAN = """\
flow: fan
inputs: {topics: {type: array}}
outputs: [scores]
budget: {cost_usd: 2.5}
steps:
  - id: each
    map:
      items: inputs.topics
      uses: judge
      with: {text: "{{ item }}"}
      collect: scores
"""

SMALL = """\
flow: small
inputs: {text: {type: string}}
outputs: [score]
steps:
  - id: judge
    uses: judge
    with: {text: "{{ inputs.text }}"}
"""

BLOCKS = {"blocks/writer.yaml": WRITER, "blocks/judge.yaml": JUDGE, "blocks/lead.yaml": LEAD}


def _yard(make_yard: MakeYard, flows: dict[str, str], config: str = CONFIG) -> Path:
    files = {**BLOCKS, **{f"flows/{name}.yaml": text for name, text in flows.items()}}
    return make_yard({"blockyard.yaml": config, **files})


def _found(root: Path) -> list[str]:
    project = load_project(root)
    assert [d.format() for d in project.diagnostics] == []
    found = [d.format() for d in semantic.check_project(project)]
    mine = [line for line in found if line.split(" ")[2] in ("BY817", "BY870", "BY871")]
    assert [line for line in found if line not in mine] == []  # the yards are otherwise sound
    return mine


def _with_budget(flow: str, budget: str) -> str:
    """`flow` with `budget` (YAML lines) after its outputs."""
    head, _, steps = flow.partition("steps:\n")
    return f"{head}{budget}steps:\n{steps}"


def test_a_loop_around_an_agent_can_pass_the_flow_budget(make_yard: MakeYard) -> None:
    assert _found(_yard(make_yard, {"refine": REFINE})) == [
        "flows/refine.yaml:5:16: warning BY870 flow 'refine' can make up to 300 model calls in one run, above "
        "budget.model_calls (100): 240 of them from loop 'refine' (max_iterations 10) × step 'write' (agent block "
        "'writer', up to 24 calls: 8 turns, 3 attempts each)"
    ]


def test_a_map_over_a_list_known_at_run_time_has_no_bound(make_yard: MakeYard) -> None:
    assert _found(_yard(make_yard, {"fan": FAN})) == [
        "flows/fan.yaml:4:1: warning BY871 flow 'fan' has no bound on its model calls: map 'each' runs block 'judge' "
        "once per item of 'inputs.topics', a list whose length is known only at run time; only the budget "
        "(cost_usd 2.5) stops such a run"
    ]


def test_a_flow_within_its_budget_gets_no_finding(make_yard: MakeYard) -> None:
    # one llm step: a call and its repair, three attempts: 6 calls of at most 500 tokens each
    flow = _with_budget(SMALL, "budget: {model_calls: 6, tokens: 3000}\n")
    assert _found(_yard(make_yard, {"small": flow})) == []


def test_the_yard_budget_applies_to_a_flow_without_one(make_yard: MakeYard) -> None:
    config = CONFIG + "budget: {model_calls: 5}\n"
    assert _found(_yard(make_yard, {"small": SMALL}, config)) == [
        "flows/small.yaml:1:7: warning BY870 flow 'small' can make up to 6 model calls in one run, above "
        "blockyard.yaml's budget.model_calls (5): step 'judge' (llm block 'judge', up to 6 calls: a call and its "
        "repair, 3 attempts)"
    ]


def test_flow_keys_win_over_the_yard_keys_one_by_one(make_yard: MakeYard) -> None:
    # the flow's model_calls (6) wins over the yard's (5); the yard's tokens still apply
    config = CONFIG + "budget: {model_calls: 5, tokens: 1000}\n"
    flow = _with_budget(SMALL, "budget: {model_calls: 6}\n")
    assert _found(_yard(make_yard, {"small": flow}, config)) == [
        "flows/small.yaml:1:7: warning BY870 flow 'small' can generate up to 3,000 output tokens in one run (6 model "
        "calls, each up to its model profile's max_tokens), above blockyard.yaml's budget.tokens (1,000), which "
        "counts input tokens too"
    ]


def test_a_turn_limit_is_checked_against_one_run(make_yard: MakeYard) -> None:
    flow = _with_budget(SMALL, "budget:\n  model_calls: 10\n  per_turn: {model_calls: 4}\n")
    assert _found(_yard(make_yard, {"small": flow})) == [
        "flows/small.yaml:6:27: warning BY870 flow 'small' can make up to 6 model calls in one thread turn, above "
        "budget.per_turn.model_calls (4): step 'judge' (llm block 'judge', up to 6 calls: a call and its repair, "
        "3 attempts)"
    ]


def test_output_tokens_are_not_guessed_without_max_tokens(make_yard: MakeYard) -> None:
    flow = _with_budget(SMALL, "budget: {tokens: 10}\n")
    assert _found(_yard(make_yard, {"small": flow}, "models:\n  default: {provider: mock}\n")) == []


def test_an_agent_with_delegates_has_no_bound(make_yard: MakeYard) -> None:
    flow = """\
        flow: lead
        inputs: {topic: {type: string}}
        outputs: [text]
        budget: {model_calls: 50}
        steps:
          - id: lead
            uses: lead
            with: {topic: "{{ inputs.topic }}"}
        """
    assert _found(_yard(make_yard, {"lead": flow})) == [
        "flows/lead.yaml:4:1: warning BY871 flow 'lead' has no bound on its model calls: step 'lead' runs agent "
        "'lead', which may call its delegates ('writer') any number of times in one turn; only the budget "
        "(model_calls 50) stops such a run"
    ]


def test_a_router_takes_one_way_and_parallel_steps_all_run(make_yard: MakeYard) -> None:
    # the worst way through the router is the agent (24 calls), then the judge (6): 30, not 36
    routed = """\
        flow: routed
        inputs: {topic: {type: string}}
        outputs: [score]
        budget: {model_calls: 29}
        steps:
          - id: route
            router:
              value: "{{ inputs.topic }}"
              routes: [{contains: long, goto: write}]
              default: short
          - id: write
            uses: writer
            with: {topic: "{{ inputs.topic }}"}
            goto: judge
          - id: short
            uses: judge
            with: {text: "{{ inputs.topic }}"}
            outputs: {score: first}
          - id: judge
            uses: judge
            with: {text: "{{ inputs.topic }}"}
        """
    # after `a`, `b` and `c` run side by side, then `d` that needs both: all four, 24 (a path has 18)
    parallel = """\
        flow: parallel
        inputs: {topic: {type: string}}
        outputs: [score]
        budget: {model_calls: 23}
        steps:
          - id: a
            uses: judge
            with: {text: "{{ inputs.topic }}"}
            outputs: {score: a}
          - id: b
            uses: judge
            needs: [a]
            with: {text: "{{ inputs.topic }}"}
            outputs: {score: b}
          - id: c
            uses: judge
            needs: [a]
            with: {text: "{{ inputs.topic }}"}
            outputs: {score: c}
          - id: d
            uses: judge
            needs: [b, c]
            with: {text: "{{ inputs.topic }}"}
        """
    assert _found(_yard(make_yard, {"routed": routed, "parallel": parallel})) == [
        "flows/parallel.yaml:4:23: warning BY870 flow 'parallel' can make up to 24 model calls in one run, above "
        "budget.model_calls (23): 6 of them from step 'a' (llm block 'judge', up to 6 calls: a call and its "
        "repair, 3 attempts)",
        "flows/routed.yaml:4:23: warning BY870 flow 'routed' can make up to 30 model calls in one run, above "
        "budget.model_calls (29): 24 of them from step 'write' (agent block 'writer', up to 24 calls: 8 turns, "
        "3 attempts each)",
    ]


def test_a_back_edge_runs_its_steps_as_often_as_max_visits_allows(make_yard: MakeYard) -> None:
    # `draft` is entered at most 3 times; `check` (a decide step) once per pass: 1 + 3 passes
    decide = """\
        block: check
        kind: decide
        inputs: {text: {type: string}}
        outputs: {verdict: {type: string, enum: [ok, again]}}
        prompt: {user: "Is {{ text }} good?"}
        """
    flow = """\
        flow: again
        inputs: {topic: {type: string}}
        outputs: [verdict]
        budget: {model_calls: 40}
        steps:
          - id: draft
            uses: judge
            with: {text: "{{ inputs.topic }}"}
            max_visits: 3
            on_max_visits: end
          - id: check
            uses: check
            with: {text: "{{ inputs.topic }}"}
            branches: {ok: end, again: draft}
        """
    root = make_yard(
        {"blockyard.yaml": CONFIG, **BLOCKS, "blocks/check.yaml": decide, "flows/again.yaml": flow}
    )
    assert _found(root) == [
        "flows/again.yaml:4:23: warning BY870 flow 'again' can make up to 42 model calls in one run, above "
        "budget.model_calls (40): 24 of them from 4 passes of the flow (back-edges to max_visits steps) × step "
        "'check' (decide block 'check', up to 6 calls: a call and its repair, 3 attempts)"
    ]


def test_literal_lists_foreach_and_subflows_are_counted(make_yard: MakeYard) -> None:
    three = """\
        flow: three
        outputs: [scores]
        budget: {model_calls: 17}
        steps:
          - id: each
            map:
              items: "['a', 'b', 'c']"
              uses: judge
              with: {text: "{{ item }}"}
              collect: scores
        """
    many = """\
        flow: many
        inputs: {texts: {type: array}}
        outputs: [scores]
        budget: {model_calls: 1000}
        steps:
          - id: each
            foreach:
              items: inputs.texts
              collect: scores
              steps:
                - id: judge
                  uses: judge
                  with: {text: "{{ item }}"}
        """
    outer = """\
        flow: outer
        outputs: [scores]
        budget: {model_calls: 17}
        steps:
          - id: inner
            flow: three
        """
    assert _found(_yard(make_yard, {"three": three, "many": many, "outer": outer})) == [
        "flows/many.yaml:4:23: warning BY870 flow 'many' can make up to 6,000 model calls in one run, above "
        "budget.model_calls (1,000): foreach 'each' (up to 1000 items) × step 'judge' (llm block 'judge', up to 6 "
        "calls: a call and its repair, 3 attempts)",
        "flows/outer.yaml:3:23: warning BY870 flow 'outer' can make up to 18 model calls in one run, above "
        "budget.model_calls (17): subflow step 'inner' (flow 'three') × map 'each' (3 items) × each item (llm "
        "block 'judge', up to 6 calls: a call and its repair, 3 attempts)",
        "flows/three.yaml:3:23: warning BY870 flow 'three' can make up to 18 model calls in one run, above "
        "budget.model_calls (17): map 'each' (3 items) × each item (llm block 'judge', up to 6 calls: a call and "
        "its repair, 3 attempts)",
    ]


def test_retry_settings_change_the_count(make_yard: MakeYard) -> None:
    # one attempt: a call and its repair; an agent with a timeout may run again as a whole
    once = JUDGE + "retry: {attempts: 1}\n"
    timed = WRITER + "timeout: 5m\nretry: {attempts: 2}\n"
    flow = """\
        flow: f
        inputs: {topic: {type: string}}
        outputs: [score]
        budget: {model_calls: 1}
        steps:
          - id: write
            uses: writer
            with: {topic: "{{ inputs.topic }}"}
          - id: judge
            uses: judge
            with: {text: "{{ context.text }}"}
        """
    root = make_yard(
        {
            "blockyard.yaml": CONFIG,
            "blocks/writer.yaml": timed,
            "blocks/judge.yaml": once,
            "flows/f.yaml": flow,
        }
    )
    assert _found(root) == [
        "flows/f.yaml:4:23: warning BY870 flow 'f' can make up to 34 model calls in one run, above "
        "budget.model_calls (1): 32 of them from step 'write' (agent block 'writer', up to 32 calls: 8 turns, 2 "
        "attempts each, the whole agent 2 times)"
    ]


def test_the_policy_can_require_a_budget(make_yard: MakeYard) -> None:
    config = CONFIG + "policy: {require_budget: true}\n"
    assert _found(_yard(make_yard, {"small": SMALL}, config)) == [
        "flows/small.yaml:1:7: error BY817 flow 'small' has no budget, and the yard's policy requires one "
        "(policy.require_budget): add `budget:` to the flow (model_calls, tokens, cost_usd or wall_time) or a "
        "default `budget:` to blockyard.yaml"
    ]
    assert _found(_yard(make_yard, {"small": SMALL}, config + "budget: {wall_time: 1h}\n")) == []


def test_validate_exits_0_with_budget_warnings(
    make_yard: MakeYard, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(_yard(make_yard, {"fan": FAN}))
    assert validate_command([], "text", None) == 0
    out, err = capsys.readouterr()
    assert [line.split(" ")[2] for line in out.splitlines()] == ["BY871"]
    assert err == "1 warning in 1 file (5 checked)\n"


def test_foreach_bound_is_the_compilers() -> None:
    assert FOREACH_ITEMS == MAX_ITEMS


def test_only_literal_lists_have_a_known_length() -> None:
    assert [
        literal_items(text)
        for text in ("[1, 2, 3]", "(1, 2)", "[]", "inputs.items", "[1] + [2]", "[")
    ] == [3, 2, 0, None, None, None]


def test_a_smart_block_counts_its_predictions_and_dspy_formats(make_yard: MakeYard) -> None:
    smart = """\
        block: rate
        kind: smart
        inputs: {text: {type: string}}
        outputs: {score: {type: integer}}
        guardrails: {attempts: 2}
        """
    flow = """\
        flow: s
        inputs: {text: {type: string}}
        outputs: [score]
        budget: {model_calls: 11}
        steps:
          - id: rate
            uses: rate
            with: {text: "{{ inputs.text }}"}
        """
    root = make_yard({"blockyard.yaml": CONFIG, "blocks/rate.yaml": smart, "flows/s.yaml": flow})
    assert _found(root) == [
        "flows/s.yaml:4:23: warning BY870 flow 's' can make up to 12 model calls in one run, above budget.model_calls "
        "(11): step 'rate' (smart block 'rate', up to 12 calls: 2 predictions in 2 formats (DSPy's fallback), 3 "
        "attempts)"
    ]


def test_a_flow_delegate_without_model_calls_keeps_the_bound(make_yard: MakeYard) -> None:
    shout = """\
        block: shout
        kind: transform
        inputs: {text: {type: string}}
        outputs: {text: {type: string}}
        compute: {text: "text | upper"}
        """
    helper = """\
        flow: helper
        inputs: {text: {type: string}}
        outputs: [text]
        steps:
          - {id: shout, uses: shout, with: {text: "{{ inputs.text }}"}}
        """
    agent = WRITER.replace("max_iterations: 8\n", "max_iterations: 2\ndelegates: [helper]\n")
    flow = """\
        flow: f
        inputs: {topic: {type: string}}
        outputs: [text]
        budget: {model_calls: 5}
        steps:
          - {id: write, uses: writer, with: {topic: "{{ inputs.topic }}"}}
        """
    root = make_yard(
        {
            "blockyard.yaml": CONFIG,
            "blocks/writer.yaml": agent,
            "blocks/shout.yaml": shout,
            "flows/helper.yaml": helper,
            "flows/f.yaml": flow,
        }
    )
    assert _found(root) == [
        "flows/f.yaml:4:23: warning BY870 flow 'f' can make up to 6 model calls in one run, above budget.model_calls "
        "(5): step 'write' (agent block 'writer', up to 6 calls: 2 turns, 3 attempts each)"
    ]
