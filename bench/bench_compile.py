"""Compile time of generated 200-step flows: compile_flow vs LangGraph's own build + compile.

    python bench/bench_compile.py [--steps 200] [--reps 30]
    python bench/bench_compile.py --first [--steps 200]   # one fresh process: imports, then the first compile
    python bench/bench_compile.py --json [--reps 30]      # the medians as one JSON object (bench/compare.py)

Flows are built in memory (Bundle.from_source), so the figures are the compiler's alone: no
YAML, no files. Prints the median and range of `reps` interleaved compiles, the first compile of the process,
and the median per-round ratio to LangGraph's own build + compile of a plain chain. With `--first` it prints
one JSON line for this (fresh) process: the CPU its start and imports took (the compiler's included) and the time of the
first compile of the chain and then of the mixed flow (bench/compare.py runs it in fresh processes).
Both in CPU time (time.process_time: the machine is shared, wall time would count other jobs).
"""

from __future__ import annotations

import argparse
import json
import operator
import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

# the constructs these flows have (engine/compile/constructs.py imports each with the first step that needs
# it): imports too, not the compile
from engine.compile import compile_flow, foreach, loop, mapping, router, uses, visits  # noqa: F401
from engine.compile.flow import compile_flow as _loaded  # noqa: F401  the compiler's modules: imports, not the compile
from engine.definitions.pinned import Bundle

BLOCK = {
    "block": "inc",
    "kind": "transform",
    "inputs": {"n": {"type": "integer", "default": 0}},
    "outputs": {"n": {"type": "integer"}},
    "compute": {"n": "n + 1"},
}


def chain(steps: int) -> Bundle:
    flow = {
        "flow": "chain",
        "outputs": ["n"],
        "steps": [
            {"id": f"s{i}", "uses": "inc", "with": {"n": "{{ context.n | default(0) }}"}}
            for i in range(steps)
        ],
    }
    return Bundle.from_source({"flow": flow, "blocks": {"inc": BLOCK}, "flows": {}, "config": {}})


def mixed(steps: int) -> Bundle:
    """Every tenth step a router (back to the step before it, bounded by max_visits), with a
    loop, a foreach and a map in between."""
    items: list[dict[str, Any]] = []
    for i in range(steps):
        if i % 10 == 9:
            items.append(
                {
                    "id": f"s{i}",
                    "router": {
                        "value": "{{ context.n }}",
                        "routes": [{"regex": "^1", "goto": f"s{i - 1}"}],
                        "default": f"s{i + 1}" if i + 1 < steps else "end",
                    },
                }
            )
        elif i % 50 == 3:
            items.append(
                {
                    "id": f"s{i}",
                    "loop": {
                        "max_iterations": 3,
                        "until": "context.n > 2",
                        "steps": [{"id": f"s{i}_body", "uses": "inc"}],
                    },
                }
            )
        elif i % 50 == 5:
            items.append(
                {
                    "id": f"s{i}",
                    "map": {"items": "[1, 2, 3]", "as": "n", "uses": "inc", "collect": "m"},
                }
            )
        else:
            items.append(
                {"id": f"s{i}", "uses": "inc", **({"max_visits": 5} if i % 10 == 8 else {})}
            )
    flow = {"flow": "mixed", "steps": items}
    return Bundle.from_source({"flow": flow, "blocks": {"inc": BLOCK}, "flows": {}, "config": {}})


class S(TypedDict, total=False):
    log: Annotated[list[int], operator.add]


def raw_langgraph(steps: int) -> Any:
    graph = StateGraph(S)
    for i in range(steps):

        async def node(state: S, i: int = i) -> dict[str, Any]:
            return {"log": [i]}

        graph.add_node(f"n{i}", node)
        graph.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    graph.add_edge(f"n{steps - 1}", END)
    return graph.compile()


def sample(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def cpu(fn: Callable[[], Any]) -> float:
    started = time.process_time()
    fn()
    return (time.process_time() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument(
        "--first", action="store_true", help="time this process's imports and first compiles (JSON)"
    )
    parser.add_argument(
        "--json", action="store_true", help="medians in ms as one JSON object: raw, chain, mixed"
    )
    args = parser.parse_args()
    if args.first:
        imports = time.process_time() * 1000  # the process's CPU so far: startup and imports
        linear, varied = chain(args.steps), mixed(args.steps)  # pinning: not part of the compile
        first = {
            "imports_ms": imports,
            "chain_ms": cpu(lambda: compile_flow(linear)),
            "mixed_ms": cpu(lambda: compile_flow(varied)),
        }
        print(json.dumps(first))
        return
    linear, varied = chain(args.steps), mixed(args.steps)
    variants: dict[str, Callable[[], Any]] = {
        f"LangGraph alone, {args.steps}-node chain": lambda: raw_langgraph(args.steps),
        f"compile_flow, {args.steps}-step chain": lambda: compile_flow(linear),
        f"compile_flow, {args.steps} steps (routers, loop, map)": lambda: compile_flow(varied),
    }
    cold = {name: sample(fn) for name, fn in variants.items()}
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    # interleaved, order reversed every other round: drift hits all alike
    for round_ in range(args.reps):
        for name in names if round_ % 2 == 0 else reversed(names):
            samples[name].append(sample(variants[name]))
    if args.json:
        raw_ms, chain_ms, mixed_ms = (statistics.median(samples[name]) for name in names)
        print(
            json.dumps(
                {"steps": args.steps, "raw_ms": raw_ms, "chain_ms": chain_ms, "mixed_ms": mixed_ms}
            )
        )
        return
    base = samples[names[0]]
    for name in names:
        values = samples[name]
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(
            f"{name:<44} median {statistics.median(values):6.1f} ms  (range {min(values):.1f}-{max(values):.1f}, "
            f"first {cold[name]:.1f})  x{ratio:.2f} of LangGraph alone"
        )


if __name__ == "__main__":
    main()
