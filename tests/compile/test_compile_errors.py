"""How failing steps report themselves (what cannot compile is the validator's to refuse:
tests/validate/test_validate_compiler_rules.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from engine.compile import CompiledFlow, StepFailed
from engine.core.errors import RunError
from tests.compile.compile_kit import FakeTools, run


def test_input_type_error_names_flow_step_block_and_key(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: typed
        outputs: [sum]
        steps:
          - {id: total, uses: add, with: {a: 1, b: "{{ 'two' }}"}}
        """)
    result = run(compiled)
    assert isinstance(result.error, StepFailed)
    assert (
        str(result.error)
        == "flow 'typed', step 'total' (block 'add'): input 'b' must be a number, got string 'two'"
    )
    assert (result.error.flow, result.error.step, result.error.block) == ("typed", "total", "add")
    failed = result.of("step_failed")
    assert failed == [
        {
            "type": "step_failed",
            "step": "total",
            "data": {
                "block": "add",
                "error": "input 'b' must be a number, got string 'two'",
                "duration_ms": failed[0]["data"]["duration_ms"],
                "attempt": 1,
            },
        }
    ]


def test_output_type_error(build: Callable[..., CompiledFlow]) -> None:
    wrong = "block: wrong\nkind: transform\noutputs: {count: {type: integer}}\ncompute: {count: \"'many'\"}\n"
    compiled = build(
        """
        flow: typed
        steps:
          - {id: count, uses: wrong}
        """,
        blocks={"wrong": wrong},
    )
    result = run(compiled)
    assert str(result.error) == (
        "flow 'typed', step 'count' (block 'wrong'): output 'count' must be an integer, "
        "got string 'many'"
    )


def test_nested_type_errors_name_the_path(build: Callable[..., CompiledFlow]) -> None:
    lines = """
        block: lines
        kind: transform
        inputs:
          rows: {type: array, items: {type: object, properties: {qty: {type: integer}}}}
        outputs: {n: {type: integer}}
        compute: {n: "rows | length"}
        """
    compiled = build(
        """
        flow: typed
        steps:
          - {id: count, uses: lines, with: {rows: [{qty: 1}, {qty: 2.5}]}}
        """,
        blocks={"lines": lines},
    )
    assert str(run(compiled).error) == (
        "flow 'typed', step 'count' (block 'lines'): input 'rows[1].qty' must be an "
        "integer, got number 2.5"
    )


def test_unbound_input(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: unbound
        steps:
          - {id: total, uses: add, with: {a: 1}}
        """)
    assert str(run(compiled).error) == (
        "flow 'unbound', step 'total' (block 'add'): input 'b' is not bound: no "
        "`with:` binding, no context key or flow input named 'b', and no default"
    )


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (
            "'{{ context.nope }}'",
            "input 'text': cannot evaluate 'context.nope': 'dict object' has no attribute 'nope'",
        ),
        (
            "'{{ 1 + }}'",
            "input 'text': expression syntax error in '1 +': unexpected 'end of template'",
        ),
        (
            "'x {{ missing }} y'",
            "input 'text': cannot render 'x {{ missing }} y': 'missing' is undefined",
        ),
        (
            "'{{ inputs.__class__ }}'",
            "input 'text': cannot evaluate 'inputs.__class__': access to attribute "
            "'__class__' of 'dict' object is unsafe.",
        ),
    ],
)
def test_template_errors(build: Callable[..., CompiledFlow], binding: str, reason: str) -> None:
    compiled = build(f"""
        flow: templated
        steps:
          - {{id: say, uses: echo, with: {{text: {binding}}}}}
        """)
    result = run(compiled)
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == f"flow 'templated', step 'say' (block 'echo'): {reason}"


def test_compute_errors_name_the_output(build: Callable[..., CompiledFlow]) -> None:
    divide = (
        "block: divide\nkind: transform\ninputs: {a: {type: number}}\noutputs: {q: {type: number}}\n"
        'compute: {q: "a / 0"}\n'
    )
    compiled = build(
        "flow: d\nsteps:\n  - {id: s, uses: divide, with: {a: 1}}\n", blocks={"divide": divide}
    )
    assert str(run(compiled).error) == (
        "flow 'd', step 's' (block 'divide'): compute 'q': cannot evaluate 'a / 0': "
        "division by zero"
    )


def test_missing_flow_output_is_named(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("flow: out\noutputs: [n, totl]\nsteps:\n  - {id: s, uses: inc}\n")
    result = run(compiled)
    assert result.error is None
    with pytest.raises(RunError, match="flow 'out' finished without output 'totl'") as caught:
        result.outputs  # noqa: B018 - the property raises
    assert str(caught.value) == "flow 'out' finished without output 'totl' (the context has 'n')"


TOOL_BLOCK = """
    block: fetch
    kind: tool
    tool: fetch
    timeout: 100ms
    retry: {attempts: 2, initial: 10ms, on: [timeout]}
    inputs: {url: {type: string}}
    outputs: {body: {type: string}, status: {type: integer}}
    """


def test_tool_results_must_match_the_outputs(build: Callable[..., CompiledFlow]) -> None:
    compiled = build(
        "flow: t\nsteps:\n  - {id: get, uses: fetch, with: {url: x}}\n",
        blocks={"fetch": TOOL_BLOCK},
    )
    tools = FakeTools({"fetch": lambda url: {"body": "b", "stauts": 200}})
    assert str(run(compiled, tools=tools).error) == (
        "flow 't', step 'get' (block 'fetch'): unknown output 'stauts' "
        "(the block declares 'body', 'status')"
    )
    tools = FakeTools({"fetch": lambda url: {"body": "b", "status": 200}})
    result = run(compiled, tools=tools)
    assert result.error is None and result.context == {"body": "b", "status": 200}
    assert tools.calls == [("fetch", {"url": "x"})]
    assert result.of("tool_call")[0]["data"] == {
        "tool": "fetch",
        "args": {"url": "x"},
        "block": "fetch",
    }


def test_timeouts_fail_the_step_after_its_retries(build: Callable[..., CompiledFlow]) -> None:
    async def slow(url: str) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {"body": "late", "status": 200}

    compiled = build(
        "flow: t\nsteps:\n  - {id: get, uses: fetch, with: {url: x}}\n",
        blocks={"fetch": TOOL_BLOCK},
    )
    result = run(compiled, tools=FakeTools({"fetch": slow}))
    assert str(result.error) == "flow 't', step 'get' (block 'fetch'): timed out after 100ms"
    assert [e["type"] for e in result.events if e["type"] != "tool_call"] == [
        "step_started",
        "warning",
        "step_started",
        "step_failed",
    ]
    assert (
        result.of("warning")[0]["data"]["message"]
        == "attempt 1 of 2 failed: timed out after 100ms; retrying"
    )
    assert result.of("step_started")[1]["data"]["attempt"] == 2


def test_a_retry_can_succeed(build: Callable[..., CompiledFlow]) -> None:
    attempts: list[int] = []

    async def flaky(url: str) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            await asyncio.sleep(5)
        return {"body": "ok", "status": 200}

    compiled = build(
        "flow: t\nsteps:\n  - {id: get, uses: fetch, with: {url: x}}\n",
        blocks={"fetch": TOOL_BLOCK},
    )
    result = run(compiled, tools=FakeTools({"fetch": flaky}))
    assert result.error is None
    assert result.context == {"body": "ok", "status": 200}
    assert len(attempts) == 2


def test_model_blocks_retry_transient_errors_by_default(build: Callable[..., CompiledFlow]) -> None:
    quick = """
        block: quick
        kind: llm
        retry: {attempts: 3, initial: 10ms}
        inputs: {q: {type: string, default: hi}}
        outputs: {answer: {type: string}}
        prompt: {user: "{{ q }}"}
        """
    compiled = build(
        "flow: m\noutputs: [answer]\nsteps:\n  - {id: ask, uses: quick}\n", blocks={"quick": quick}
    )
    replies = {"ask": [{"$error": "rate_limit"}, {"$error": "server_error"}, {"answer": "42"}]}
    result = run(compiled, replies=replies)
    assert result.error is None
    assert result.outputs == {"answer": "42"}
    assert len(result.of("warning")) == 2
    # a client error is not transient: no retry
    result = run(compiled, replies={"ask": [{"$error": "bad_request"}, {"answer": "never"}]})
    assert isinstance(result.error, StepFailed)
    assert result.of("warning") == []
    assert str(result.error) == (
        "flow 'm', step 'ask' (block 'quick'): mock model 'mock', step 'ask': "
        "scripted bad_request error"
    )


def test_llm_requests_carry_the_rendered_prompt_and_schema(
    build: Callable[..., CompiledFlow],
) -> None:
    compiled = build(
        """
        flow: hello
        inputs:
          name: {type: string}
        outputs: [greeting]
        steps:
          - {id: greet, uses: greet, with: {name: "{{ inputs.name }}"}}
        """,
        blocks={
            "greet": """
        block: greet
        kind: llm
        inputs: {name: {type: string}}
        outputs: {greeting: {type: string, description: The greeting.}}
        prompt: {system: Be warm., user: "Greet {{ name }}."}
        """
        },
    )
    result = run(compiled, {"name": "Ada"})
    assert result.error is None
    (request,) = result.model_calls
    assert (request.flow, request.step, request.block) == ("hello", "greet", "greet")
    assert (request.system, request.user, request.inputs) == (
        "Be warm.",
        "Greet Ada.",
        {"name": "Ada"},
    )
    assert request.output_schema == {
        "type": "object",
        "additionalProperties": False,
        "required": ["greeting"],
        "properties": {"greeting": {"type": "string", "description": "The greeting."}},
    }


def test_values_must_be_json_data(build: Callable[..., CompiledFlow]) -> None:
    odd = 'block: odd\nkind: transform\noutputs: {r: {type: any}}\ncompute: {r: "range(3)"}\n'
    compiled = build("flow: j\nsteps:\n  - {id: s, uses: odd}\n", blocks={"odd": odd})
    assert (
        str(run(compiled).error)
        == "flow 'j', step 's' (block 'odd'): output 'r' is not JSON data (a range)"
    )
    compiled = build(
        "flow: j\nsteps:\n  - {id: s, uses: echo, with: {text: '{{ [1, (2, 3)] }}'}}\n"
    )
    result = run(compiled)
    assert result.error is None and result.context == {"text": [1, [2, 3]]}
