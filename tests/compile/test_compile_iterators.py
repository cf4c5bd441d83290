"""foreach (sequential, context carried over) and map (parallel Send fan-out, item order)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.compile import CompiledFlow, RunContext, StepFailed
from engine.models import ModelResolver
from tests.compile.compile_kit import FakeTools, run

TOTALS = """
    flow: totals
    inputs:
      orders: {type: array}
    outputs: [lines, total, log]
    steps:
      - id: each
        foreach:
          items: inputs.orders
          as: order
          collect: lines
          steps:
            - {id: price, uses: add, with: {a: "{{ order.price }}", b: "{{ context.total | default(0) }}"},
               outputs: {sum: total}}
            - {id: note, uses: mark, with: {tag: "{{ order.name }}={{ context.total }}"}}
      - {id: done, uses: mark, with: {tag: done}}
    """


def test_foreach_carries_context_across_iterations_and_collects(
    build: Callable[..., CompiledFlow],
) -> None:
    orders = [{"name": "a", "price": 3}, {"name": "b", "price": 4}, {"name": "c", "price": 5}]
    result = run(build(TOTALS), {"orders": orders})
    assert result.error is None
    assert result.outputs == {
        "lines": [{"log": ["a=3"]}, {"log": ["a=3", "b=7"]}, {"log": ["a=3", "b=7", "c=12"]}],
        "total": 12,
        "log": ["a=3", "b=7", "c=12", "done"],
    }
    assert result.state["loops"] == {}
    started = [e for e in result.of("step_started") if e["step"] == "price"]
    assert [e["data"]["index"] for e in started] == [0, 1, 2]


def test_foreach_over_nothing_goes_on(build: Callable[..., CompiledFlow]) -> None:
    result = run(
        build(TOTALS.replace("outputs: [lines, total, log]", "outputs: [lines, log]")),
        {"orders": []},
    )
    assert result.error is None
    assert result.outputs == {"lines": [], "log": ["done"]}


def test_foreach_item_binds_the_block_input_of_its_name(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: tags
        outputs: [log]
        steps:
          - id: each
            foreach:
              items: "['x', 'y']"
              as: tag
              steps: [{id: m, uses: mark}]
        """)
    assert run(compiled).outputs == {"log": ["x", "y"]}


def test_foreach_items_must_be_a_list(build: Callable[..., CompiledFlow]) -> None:
    compiled = build(TOTALS.replace("items: inputs.orders", "items: inputs.orders | length"))
    result = run(compiled, {"orders": [1]})
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == "flow 'totals', step 'each': items must be a list, got int"


MAP = """
    flow: fan
    inputs:
      files: {type: array}
    outputs: [drafts]
    steps:
      - id: implement
        map: {items: inputs.files, as: file, uses: write, max_concurrency: 2, collect: drafts,
              with: {file: "{{ file }}", prefix: "n{{ inputs.files | length }}"}}
    """
WRITE = """
    block: write
    kind: tool
    tool: slow_write
    inputs:
      file: {type: string}
      prefix: {type: string}
    outputs:
      draft: {type: string}
    """


class Gauge:
    """Counts calls in flight; items finish in reverse order of their start (long first)."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.started: list[str] = []

    async def __call__(self, file: str, prefix: str) -> str:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.started.append(file)
        await asyncio.sleep(0.05 if file == "a" else 0.01)
        self.running -= 1
        return f"{prefix}:{file.upper()}"


def test_map_collects_in_item_order_with_bounded_concurrency(
    build: Callable[..., CompiledFlow],
) -> None:
    gauge = Gauge()
    files = ["a", "b", "c", "d", "e", "f"]
    result = run(
        build(MAP, blocks={"write": WRITE}),
        {"files": files},
        tools=FakeTools({"slow_write": gauge}),
    )
    assert result.error is None
    assert result.outputs == {"drafts": [{"draft": f"n6:{f.upper()}"} for f in files]}
    assert gauge.peak == 2
    assert sorted(gauge.started) == files
    assert result.state["loops"] == {}
    items = [e["data"]["index"] for e in result.of("step_finished") if "index" in e["data"]]
    assert sorted(items) == list(range(6))


def test_map_without_a_bound_runs_all_items_at_once(build: Callable[..., CompiledFlow]) -> None:
    gauge = Gauge()
    compiled = build(MAP.replace("max_concurrency: 2, ", ""), blocks={"write": WRITE})
    result = run(compiled, {"files": ["a", "b", "c", "d"]}, tools=FakeTools({"slow_write": gauge}))
    assert result.error is None
    assert gauge.peak == 4


def test_map_over_nothing_goes_on(build: Callable[..., CompiledFlow]) -> None:
    flow = MAP.replace("outputs: [drafts]", "outputs: [drafts, log]").rstrip()
    compiled = build(
        flow + "\n      - {id: after, uses: mark, with: {tag: after}}\n", blocks={"write": WRITE}
    )
    result = run(compiled, {"files": []})
    assert result.error is None
    assert result.outputs == {"drafts": [], "log": ["after"]}


def test_map_with_a_body_of_steps(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: bodies
        inputs:
          numbers: {type: array}
        outputs: [sums, n]
        steps:
          - {id: seed, uses: inc, with: {n: 100}}
          - id: each
            map:
              items: inputs.numbers
              as: x
              collect: sums
              steps:
                - {id: double, uses: add, with: {a: "{{ x }}", b: "{{ x }}"}}
                - {id: plus_n, uses: add, with: {a: "{{ context.sum }}", b: "{{ context.n }}"}}
        """)
    result = run(compiled, {"numbers": [1, 2, 3]})
    assert result.error is None
    # each item sees the context of the map's start (n=101) and its own body's writes only
    assert result.outputs == {"sums": [{"sum": 103}, {"sum": 105}, {"sum": 107}], "n": 101}
    assert "sum" not in result.context


def test_a_failing_map_item_names_its_position(build: Callable[..., CompiledFlow]) -> None:
    def picky(file: str, prefix: str) -> Any:
        if file == "bad":
            raise ValueError("cannot write 'bad'")
        return f"ok:{file}"

    result = run(
        build(MAP, blocks={"write": WRITE}),
        {"files": ["a", "bad"]},
        tools=FakeTools({"slow_write": picky}),
    )
    assert isinstance(result.error, StepFailed)
    assert str(result.error) == (
        "flow 'fan', step 'implement' item 1 (block 'write'): ValueError: cannot write 'bad'"
    )
    failed = result.of("step_failed")
    assert failed[-1]["step"] == "implement" and failed[-1]["data"]["index"] == 1


def test_map_items_inside_foreach_see_both_items(build: Callable[..., CompiledFlow]) -> None:
    compiled = build("""
        flow: grid
        outputs: [rows]
        steps:
          - id: rows_loop
            foreach:
              items: "[1, 2]"
              as: row
              collect: rows
              steps:
                - id: cols
                  map:
                    items: "[10, 20]"
                    as: col
                    uses: add
                    with: {a: "{{ row }}", b: "{{ col }}"}
                    collect: cells
        """)
    result = run(compiled)
    assert result.error is None
    assert result.outputs == {
        "rows": [{"cells": [{"sum": 11}, {"sum": 21}]}, {"cells": [{"sum": 12}, {"sum": 22}]}]
    }


def test_a_failed_run_resumes_mid_foreach_and_mid_map(build: Callable[..., CompiledFlow]) -> None:
    broken = {"now": True}

    def write(file: str, prefix: str) -> str:
        if file == "c" and broken["now"]:
            raise ConnectionError("disk went away")
        return f"{prefix}{file}"

    compiled = build(
        """
        flow: resumable
        outputs: [rows, log]
        steps:
          - id: each
            foreach:
              items: "[['a', 'b'], ['c', 'd']]"
              as: files
              collect: rows
              steps:
                - {id: tag, uses: mark, with: {tag: "{{ files[0] }}"}}
                - {id: fan, map: {items: files, as: file, uses: write, with: {prefix: "w:"}, collect: drafts}}
        """,
        blocks={"write": WRITE},
    )
    tools = FakeTools({"slow_write": write})
    context = RunContext(
        run_id="resume",
        models=ModelResolver(compiled.bundle.config, env={}),
        tools=tools,
        workspace=Path("."),
    )
    config = compiled.config("resume-thread")

    async def go(start: Any) -> Any:
        return await compiled.graph.ainvoke(start, config, context=context)

    with pytest.raises(
        StepFailed, match=r"item 0 \(block 'write'\): ConnectionError: disk went away"
    ):
        asyncio.run(go(compiled.initial_state({})))
    broken["now"] = False
    final = asyncio.run(go(None))  # continue from the last checkpoint, as `blockyard resume` does
    assert compiled.outputs(final) == {
        "rows": [
            {"drafts": [{"draft": "w:a"}, {"draft": "w:b"}]},
            {"drafts": [{"draft": "w:c"}, {"draft": "w:d"}]},
        ],
        "log": ["a", "c"],
    }
    assert [name for name, _ in tools.calls].count(
        "slow_write"
    ) == 5  # a, b, c (failed), then c and d
    assert final["loops"] == {}
