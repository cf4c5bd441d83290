"""The worst case `blockyard validate` states for a budget (BY870, engine/validate/semantic/budgets.py)
is what a run can really make: a scripted mock model that fails and answers badly at every chance
drives a real run to exactly that many `model_call` events, within a budget of that size."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.definitions.project import load_project
from engine.runtime.yard import Yard
from engine.validate import semantic

MakeYard = Callable[[dict[str, str]], Path]

# every attempt of `count` gets a reply that does not match its output and a failed repair, until
# the last attempt's repair answers; every turn of `dig` fails once before it goes on
CONFIG = """\
models:
  default:
    provider: mock
    replies:
      count: [oops, {$error: timeout}, oops, {$error: timeout}, oops, {n: 3}]
      dig:
        - {$error: timeout}
        - {$tool_calls: [{name: current_time, args: {}}]}
        - {$error: timeout}
        - {answer: found}
"""

COUNT = """\
block: count
kind: llm
inputs: {topic: {type: string}}
outputs: {n: {type: integer}}
prompt: {user: "How many {{ topic }}?"}
retry: {attempts: 3, initial: 1ms}
"""

DIGGER = """\
block: digger
kind: agent
tools: [current_time]
max_iterations: 2
retry: {attempts: 2, initial: 1ms}
inputs: {task: {type: string}}
outputs: {answer: {type: string}}
prompt: {user: "{{ task }}"}
"""

FLOW = """\
flow: worst
inputs: {topic: {type: string, default: bees}}
outputs: [answer]
budget: {model_calls: LIMIT}
steps:
  - {id: count, uses: count, with: {topic: "{{ inputs.topic }}"}}
  - {id: dig, uses: digger, with: {task: "Count {{ context.n }}"}}
"""


def _yard(make_yard: MakeYard, limit: int) -> Path:
    return make_yard(
        {
            "blockyard.yaml": CONFIG,
            "blocks/count.yaml": COUNT,
            "blocks/digger.yaml": DIGGER,
            "flows/worst.yaml": FLOW.replace("LIMIT", str(limit)),
        }
    )


def test_a_run_can_make_exactly_the_worst_case_validate_states(make_yard: MakeYard) -> None:
    below = load_project(_yard(make_yard, 9))
    assert [d.format() for d in semantic.check_project(below)] == [
        "flows/worst.yaml:4:23: warning BY870 flow 'worst' can make up to 10 model calls in one run, above "
        "budget.model_calls (9): 6 of them from step 'count' (llm block 'count', up to 6 calls: a call and its "
        "repair, 3 attempts)"
    ]

    root = _yard(make_yard, 10)
    assert semantic.check_project(load_project(root)) == []
    with Yard.load(root) as yard:
        result = yard.run("worst")
        calls = [
            (event.step, event.data["purpose"], event.data["ok"])
            for event in yard.events(result.run_id)
            if event.type == "model_call"
        ]
        record = yard.get_run(result.run_id)
    assert result.status == "finished", result.error
    assert result.outputs == {"answer": "found"}
    assert calls == [
        ("count", "block", True),
        ("count", "repair", False),  # attempt 1: a bad reply, its repair fails
        ("count", "block", True),
        ("count", "repair", False),  # attempt 2: the same
        ("count", "block", True),
        ("count", "repair", True),  # attempt 3: the repair answers
        ("dig", "agent", False),
        ("dig", "agent", True),  # turn 1 fails once, then calls a tool
        ("dig", "agent", False),
        ("dig", "agent", True),  # turn 2 fails once, then answers
    ]
    assert record is not None and record.model_calls == 10
