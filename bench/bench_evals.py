"""`blockyard eval` against the model calls alone: 200 cases × 3 assertions with `-j 16`, the model a
loopback OpenAI-compatible server (its own process) that answers each call in 50 ms (the figures are in
docs/performance.md, "Evals").

    python bench/bench_evals.py            # BENCH_ROUNDS=5 interleaved rounds after one warm-up
    python bench/bench_evals.py --json     # the medians and the ratio as one JSON object

- **calls alone**: the 200 requests the eval's flow makes (its llm block's: system and user prompt,
  output schema, streamed), through the engine's own client of the profile (the provider, measured and
  priced), 16 at a time: what evaluating cannot do without.
- **blockyard eval**: `evaluate()` of the eval file, as `blockyard eval -j 16 --no-cache` runs it: reading
  and checking the eval file, pinning the flow, a run of it per case on a throw-away state database,
  3 assertions per case (contains, regex, expr), the progress, and the results kept in the yard's state
  database. The cache is off, so every round asks the server.

Target: eval ≤ 1.3 × calls alone (the median over rounds of each round's ratio).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import make_yard, median, rounds, table

from engine.definitions.project import load_project
from engine.evals.command import Options, evaluate
from engine.models.base import StructuredRequest
from engine.models.resolver import ModelResolver
from engine.spec.typecheck import outputs_schema

CASES = int(os.environ.get("BENCH_CASES", 200))
JOBS = 16
DELAY = 0.05

SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.support.openai_stub import OpenAIStub, Reply
stub = OpenAIStub()
stub.default = Reply(structured={"greeting": "Hello there, friend"}, delay=float(sys.argv[2]))
stub.start()
print(stub.base_url, flush=True)
sys.stdin.read()
"""


def start_server() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(Path(__file__).resolve().parents[1]), str(DELAY)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def yard(base_url: str) -> Path:
    cases = "\n".join(f"  - {{name: case {n}, inputs: {{name: Person{n}}}}}" for n in range(CASES))
    return make_yard(
        {
            "blockyard.yaml": f"""
            models:
              default: {{provider: openai, name: stub-model, base_url: "{base_url}", api_key_env: BENCH_KEY}}
        """,
            "blocks/greet.yaml": """
            block: greet
            kind: llm
            inputs: {name: {type: string}}
            outputs: {greeting: {type: string}}
            prompt: {system: You write short greetings., user: "Greet {{ name }}."}
        """,
            "flows/greet.yaml": """
            flow: greet
            inputs: {name: {type: string}}
            outputs: [greeting]
            steps:
              - {id: greet, uses: greet, with: {name: "{{ inputs.name }}"}}
        """,
            "evals/greet.yaml": "eval: greetings\nflow: greet\nassert:\n  - {contains: Hello}\n  - {regex: '^Hello'}\n"
            "  - {expr: 'outputs.greeting | length > 3'}\ncases:\n" + cases + "\n",
        }
    )


def calls_alone(root: Path) -> tuple[float, float]:
    project = load_project(root)
    block = project.block("greet")
    assert block is not None
    schema = outputs_schema(block.spec.outputs)
    client = ModelResolver(project.config).for_profile("default")

    async def main() -> None:
        slots = asyncio.Semaphore(JOBS)

        async def one(number: int) -> None:
            request = StructuredRequest(
                flow="greet",
                step="greet",
                block="greet",
                system="You write short greetings.",
                user=f"Greet Person{number}.",
                output_schema=schema,
                inputs={"name": f"Person{number}"},
                on_token=lambda text: None,
            )
            async with slots:
                await client.structured(request)

        await asyncio.gather(*(one(number) for number in range(CASES)))

    began, cpu = time.perf_counter(), time.process_time()
    asyncio.run(main())
    return time.perf_counter() - began, time.process_time() - cpu


def eval_run(root: Path) -> tuple[float, float]:
    began, cpu = time.perf_counter(), time.process_time()
    outcome = evaluate(root, Options(jobs=JOBS, cache=False), err=io.StringIO())
    seconds = time.perf_counter() - began, time.process_time() - cpu
    assert outcome.exit_code == 0 and sum(len(result.cases) for result in outcome.head) == CASES, (
        outcome.misses
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ["BENCH_KEY"] = "not-a-real-key"
    server, base_url = start_server()
    try:
        root = yard(base_url)
        variants = {
            "calls alone": lambda: calls_alone(root),
            "blockyard eval": lambda: eval_run(root),
        }
        for variant in variants.values():  # warm-up: imports, the first connections
            variant()
        gc.collect()
        gc.freeze()  # what is loaded stays, unscanned, as in a `blockyard` process (engine/cli/startup.py)
        samples: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for index in range(rounds(5)):
            order = list(variants) if index % 2 == 0 else list(reversed(variants))
            for name in order:
                wall, used = variants[name]()
                samples[name].append(wall)
                cpu[name].append(used)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    alone, evaluated = median(samples["calls alone"]), median(samples["blockyard eval"])
    # each round's eval against the calls alone measured next to it: the drift of a shared machine hits both
    ratios = [e / a for e, a in zip(samples["blockyard eval"], samples["calls alone"], strict=True)]
    cpu_ratios = [e / a for e, a in zip(cpu["blockyard eval"], cpu["calls alone"], strict=True)]
    if args.json:
        print(
            json.dumps(
                {
                    "calls_alone_s": alone,
                    "eval_s": evaluated,
                    "ratio": median(ratios),
                    "cpu_ratio": median(cpu_ratios),
                    "ratios": ratios,
                    "samples": samples,
                    "cpu": cpu,
                }
            )
        )
        return
    print(f"\n## {CASES} cases × 3 assertions, -j {JOBS}, model 50 ms per call\n")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; medians of "
        f"{len(ratios)} interleaved rounds\n"
    )
    print(
        table(
            ["what", "median", "rounds"],
            [
                [
                    "calls alone",
                    f"{alone:.3f} s",
                    " ".join(f"{s:.2f}" for s in samples["calls alone"]),
                ],
                [
                    "blockyard eval",
                    f"{evaluated:.3f} s",
                    " ".join(f"{s:.2f}" for s in samples["blockyard eval"]),
                ],
                [
                    "eval / calls, per round",
                    f"{median(ratios):.2f}×",
                    " ".join(f"{r:.2f}" for r in ratios),
                ],
                [
                    "CPU: eval / calls, per round",
                    f"{median(cpu_ratios):.2f}×",
                    " ".join(f"{r:.2f}" for r in cpu_ratios),
                ],
            ],
        )
    )


if __name__ == "__main__":
    main()
