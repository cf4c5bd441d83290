"""State hygiene: nodes write only declared keys (LangGraph drops others silently), the state
stays JSON-plain, and the compiler reads no files."""

from __future__ import annotations

import asyncio
import builtins
import io
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.compile import CompiledFlow, RunContext, compile_flow
from engine.compile.state import STATE_KEYS
from engine.models import ModelResolver, scripted
from tests.compile.compile_kit import FakeTools

CHILD = """
    flow: child
    inputs:
      a: {type: number}
    outputs: [sum]
    steps:
      - {id: plus, uses: add, with: {b: 1}}
    """

EVERY_CONSTRUCT = """
    flow: every
    inputs:
      status: {type: string}
    outputs: [log, drafts, checked, lines, sum]
    steps:
      - id: triage
        router:
          value: "{{ inputs.status }}"
          routes:
            - {regex: "^err", goto: fix}
          default: review
      - {id: fix, uses: mark, with: {tag: fix}, max_visits: 3, on_max_visits: review}
      - id: review
        loop:
          max_iterations: 3
          until: context.n >= 2
          steps:
            - {id: qa, uses: inc}
            - {id: apply, uses: mark, with: {tag: applied}}
      - id: ask
        uses: pick
        branches: {yes: totals, no: triage}
      - id: totals
        foreach: {items: "[1, 2]", as: order, collect: lines, steps: [{id: line, uses: inc}]}
      - id: implement
        map: {items: "['x', 'y']", as: file, uses: echo, max_concurrency: 1, collect: drafts,
              with: {text: "{{ file }}"}}
      - id: drafts_step
        map:
          items: "['x', 'y']"
          collect: checked
          steps:
            - {id: draft, uses: inc}
            - {id: check, uses: mark, with: {tag: "{{ item }}"}}
      - {id: research, flow: child, with: {a: 1}}
    """


async def updates(
    compiled: CompiledFlow, inputs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    config = compiled.config(uuid.uuid4().hex)
    seen: list[Any] = []
    with scripted("state", {"ask": ["yes"]}):
        context = RunContext(
            run_id="state",
            models=ModelResolver(compiled.bundle.config, env={}, run_id="state"),
            tools=FakeTools(),
            workspace=Path("."),
        )
        async for _ns, data in compiled.graph.astream(
            compiled.initial_state(inputs),
            config,
            context=context,
            stream_mode="updates",
            subgraphs=True,
        ):
            seen.append(data)
    return seen, dict((await compiled.graph.aget_state(config)).values)


def test_nodes_write_only_state_keys_and_the_state_is_json(
    build: Callable[..., CompiledFlow],
) -> None:
    compiled = build(EVERY_CONSTRUCT, subflows={"child": CHILD})
    seen, final = asyncio.run(updates(compiled, {"status": "err1"}))
    assert compiled.outputs(final) == {
        "log": ["fix", "applied", "applied"],
        "drafts": [{"text": "x"}, {"text": "y"}],
        "checked": [
            {"log": ["fix", "applied", "applied", "x"]},
            {"log": ["fix", "applied", "applied", "y"]},
        ],
        "lines": [{"n": 3}, {"n": 4}],
        "sum": 2,
    }
    assert len(seen) > 10
    for chunk in seen:
        for node, update in chunk.items():
            if update is None:
                continue
            assert set(update) <= STATE_KEYS, (node, update)
    plain = {key: value for key, value in final.items() if key != "messages"}
    assert json.loads(json.dumps(plain)) == plain
    assert final["loops"] == {
        "fix.v": 1
    }  # only the visit counts of max_visits steps stay for the run


def test_compiling_reads_no_files(
    build: Callable[..., CompiledFlow], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = build(EVERY_CONSTRUCT, subflows={"child": CHILD}).bundle

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the compiler opened a file: {args!r}")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(io, "open", refuse)
    monkeypatch.setattr(os, "open", refuse)
    compiled = compile_flow(bundle)
    assert compiled.mermaid().startswith("flowchart TD")
