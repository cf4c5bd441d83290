"""Decide branches and router rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.compile import CompiledFlow
from tests.compile.compile_kit import run

DECIDE = """
    flow: choose
    outputs: [log]
    steps:
      - id: ask
        uses: pick
        branches: {yes: on_yes, no: on_no}
      - {id: on_maybe, uses: mark, with: {tag: maybe}, goto: end}
      - {id: on_yes, uses: mark, with: {tag: yes}, goto: end}
      - {id: on_no, uses: mark, with: {tag: no}}
    """


@pytest.mark.parametrize(
    ("choice", "log"), [("yes", ["yes"]), ("no", ["no"]), ("maybe", ["maybe"])]
)
def test_branches_follow_the_decide_value(
    build: Callable[..., CompiledFlow], choice: str, log: list[str]
) -> None:
    # `maybe` has no branch: it continues in list order with the next step
    result = run(build(DECIDE), replies={"ask": [choice]})
    assert result.error is None
    assert result.outputs == {"log": log}
    assert result.state["results"][0]["outputs"] == {"choice": choice}


ROUTER = """
    flow: triage
    inputs:
      status: {type: string}
      score: {type: number, default: 0}
    outputs: [log]
    steps:
      - id: route
        router:
          value: "{{ inputs.status }}"
          routes:
            - {regex: "^err(or)?[0-9]+$", goto: fix}
            - {equals: "DONE", goto: publish}
            - {starts_with: "wip", goto: wait}
            - {contains: "review", goto: review}
            - {expr: "inputs.score > 0.8", goto: publish}
          default: triage_again
      - {id: fix, uses: mark, with: {tag: fix}, goto: end}
      - {id: publish, uses: mark, with: {tag: publish}, goto: end}
      - {id: wait, uses: mark, with: {tag: wait}, goto: end}
      - {id: review, uses: mark, with: {tag: review}, goto: end}
      - {id: triage_again, uses: mark, with: {tag: default}}
    """


@pytest.mark.parametrize(
    ("inputs", "tag"),
    [
        ({"status": "err42"}, "fix"),
        ({"status": "error7"}, "fix"),
        ({"status": "errata"}, "default"),  # regex does not match
        ({"status": "done"}, "publish"),  # equals is case-insensitive
        ({"status": "Done"}, "publish"),
        ({"status": "wip: draft"}, "wait"),  # starts_with is case-sensitive
        ({"status": "WIP: draft"}, "default"),
        ({"status": "needs review soon"}, "review"),
        (
            {"status": "err1 needs review"},
            "review",
        ),  # first matching rule wins (regex needs the whole text)
        ({"status": "fine", "score": 0.9}, "publish"),
        ({"status": "fine", "score": 0.5}, "default"),
    ],
)
def test_router_rules_in_order_then_default(
    build: Callable[..., CompiledFlow], inputs: dict[str, Any], tag: str
) -> None:
    result = run(build(ROUTER), inputs)
    assert result.error is None
    assert result.outputs == {"log": [tag]}
    route = result.state["results"][0]
    assert route["step"] == "route" and route["block"] is None


def test_router_events_show_the_value_and_the_choice(build: Callable[..., CompiledFlow]) -> None:
    result = run(build(ROUTER), {"status": "DONE"})
    finished = result.of("step_finished")[0]
    assert finished["step"] == "route"
    assert finished["data"]["outputs"] == {"goto": "publish"}
    assert finished["data"]["value"] == "DONE"


@pytest.mark.timeout(20)
def test_catastrophic_regex_finishes_with_re2(build: Callable[..., CompiledFlow]) -> None:
    # (a+)+$ on "aaaa...ab" takes exponential time with backtracking engines (Python's `re`).
    compiled = build("""
        flow: redos
        inputs:
          text: {type: string}
        outputs: [log]
        steps:
          - id: check
            router:
              value: "{{ inputs.text }}"
              routes:
                - {regex: "^(a+)+$", goto: bad}
              default: good
          - {id: bad, uses: mark, with: {tag: bad}, goto: end}
          - {id: good, uses: mark, with: {tag: good}}
        """)
    result = run(compiled, {"text": "a" * 50_000 + "b"})
    assert result.outputs == {"log": ["good"]}


def test_router_on_non_text_values_sees_json_constants(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: flags
        inputs:
          flag: {type: boolean}
        outputs: [log]
        steps:
          - id: check
            router:
              value: "{{ inputs.flag }}"
              routes:
                - {equals: "true", goto: on}
              default: off
          - {id: on, uses: mark, with: {tag: on}, goto: end}
          - {id: off, uses: mark, with: {tag: off}}
        """)
    assert run(compiled, {"flag": True}).outputs == {"log": ["on"]}
    assert run(compiled, {"flag": False}).outputs == {"log": ["off"]}


def test_routes_and_needs_dependents_both_run(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: side
        outputs: [log, text]
        steps:
          - id: r
            router: {default: a}
          - {id: a, uses: mark, with: {tag: a}}
          - {id: audit, uses: echo, needs: [r], with: {text: audited}}
        """)
    result = run(compiled)
    assert result.outputs == {"log": ["a"], "text": "audited"}
