"""Benchmark of `blockyard validate` (not a test): `python bench/bench_validate.py [--runs N] [--flows N]`.

1. Bulk: a generated yard of 1,000 realistic flows (routers, decide branches, a bounded loop, a map,
   templates everywhere; 50-70 lines each) plus their blocks, loaded and checked (schema + semantics)
   in one process. Each run is a fresh process, so no cache survives from one run to the next;
   the time excludes interpreter start-up and imports. Target: < 2 s.
2. Cold CLI: `blockyard validate` on the repository's example yard, a new process each time,
   start-up and imports included. Target: < 0.3 s.
3. Dense needs: one flow whose every step needs the 50 before it (200, 400, 800 steps), loaded and
   checked in one process; the time should grow with the edges (800 steps: 4.4x the edges of 200).
   Before the parallel-writes check used per-region reachability bitsets and the dataflow used
   bitset facts (`blockyard validate`, whole command): 400 steps 10.5 s, 800 steps 43.9 s. Since
   (load + checks, median of 3, on a shared 2-core machine with other jobs running): 200 steps
   0.27 s, 400 steps 0.98 s, 800 steps 1.76 s; the checks alone (cProfile): 800 steps 0.3 s.
Medians are reported, with the range. `--json` prints the bulk and cold CLI medians (seconds) as one JSON
object instead, without the dense part (bench/compare.py's summary reads it). Where the time goes:
`python -X importtime -m engine validate` and `python -m cProfile -s cumtime bench/bench_validate.py --profile`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import child_env

REPO = Path(__file__).resolve().parents[1]
SCHEMA_LINE = "# yaml-language-server: $schema=../schemas/{kind}.schema.json\n"

BLOCKS = {
    "normalize": """block: normalize
version: 1
description: Clean up a text and count its words.
kind: transform
inputs:
  text: {type: string, description: The raw text.}
outputs:
  clean: {type: string, description: "The text, trimmed and lower-cased."}
  words: {type: integer, description: How many words it has.}
compute:
  clean: "text | trim | lower"
  words: "text.split() | length"
category: text
tags: [bench]
""",
    "classify": """block: classify
version: 1
description: Decide what kind of message a text is.
kind: decide
inputs:
  text: {type: string}
outputs:
  label: {type: string, enum: [bug, question, praise]}
prompt:
  system: You sort support messages.
  user: "Is this a bug report, a question or praise? {{ text }}"
category: support
tags: [bench]
""",
    "summarize_text": """block: summarize_text
version: 1
description: Summarize a text in a few sentences.
kind: llm
inputs:
  text: {type: string}
  max_sentences: {type: integer, default: 3}
outputs:
  summary: {type: string}
prompt:
  system: You are a concise editor.
  user: "Summarize in at most {{ max_sentences }} sentences: {{ text }}"
retry: {attempts: 3, backoff: 2.0}
timeout: 60s
category: text
tags: [bench]
""",
    "score": """block: score
version: 1
description: Score a summary between 0 and 1.
kind: transform
inputs:
  text: {type: string}
outputs:
  score: {type: number}
compute:
  score: "(text | length) / 100 if text | length < 100 else 1.0"
category: text
tags: [bench]
""",
    "format_report": """block: format_report
version: 1
description: Put the summary and its score into one line.
kind: transform
inputs:
  summary: {type: string}
  score: {type: number}
outputs:
  report: {type: string}
compute:
  report: "summary ~ ' (score ' ~ (score | round(2)) ~ ')'"
category: text
tags: [bench]
""",
}


def flow_text(index: int) -> str:
    extra = "".join(
        f"""  - id: note_{k}
    uses: normalize
    with: {{text: "{{{{ context.report }}}} #{k}"}}
"""
        for k in range(index % 4)
    )
    return f"""flow: pipeline_{index}
version: {1 + index % 3}
description: Generated pipeline {index}; clean, classify and summarize a text, then a batch.
inputs:
  text: {{type: string, description: The text to process.}}
  texts: {{type: array, default: [], description: More texts to summarize.}}
  threshold: {{type: number, default: 0.5}}
outputs: [report, summaries]
tags: [bench, generated]
steps:
  - id: clean
    uses: normalize
    with: {{text: "{{{{ inputs.text }}}}"}}
  - id: classify
    uses: classify
    with: {{text: "{{{{ context.clean }}}}"}}
    branches: {{bug: triage, question: answer, praise: thank}}
  - id: triage
    router:
      value: "{{{{ context.clean }}}}"
      routes:
        - {{contains: crash, goto: answer}}
        - {{regex: "^err(or)?", goto: answer}}
        - {{expr: "context.words > {100 + index}", goto: thank}}
      default: answer
  - id: answer
    uses: summarize_text
    with: {{text: "{{{{ context.clean }}}}"}}
    goto: review
  - id: thank
    uses: summarize_text
    with: {{text: "Thanks for: {{{{ context.clean }}}}", max_sentences: 1}}
  - id: review
    loop:
      max_iterations: {3 + index % 5}
      until: "context.score > inputs.threshold"
      steps:
        - id: rescore
          uses: score
          with: {{text: "{{{{ context.summary }}}}"}}
  - id: batch
    map:
      items: inputs.texts
      as: item
      uses: summarize_text
      with: {{text: "{{{{ item }}}}"}}
      max_concurrency: 4
      collect: summaries
  - id: report
    uses: format_report
    with: {{summary: "{{{{ context.summary }}}}", score: "{{{{ context.score }}}}"}}
{extra}"""


def make_yard(root: Path, flows: int) -> None:
    (root / "blocks").mkdir(parents=True)
    (root / "flows").mkdir()
    for name, text in BLOCKS.items():
        (root / "blocks" / f"{name}.yaml").write_text(
            SCHEMA_LINE.format(kind="block") + text, encoding="utf-8"
        )
    for index in range(flows):
        (root / "flows" / f"pipeline_{index}.yaml").write_text(
            SCHEMA_LINE.format(kind="flow") + flow_text(index), encoding="utf-8"
        )


def dense_flow(steps: int, window: int = 50) -> str:
    """A flow of `steps` steps, each needing the `window` steps before it (each writes its own keys)."""
    lines = ["flow: dense", "version: 1", "inputs:", "  text: {type: string}", "steps:"]
    for i in range(steps):
        lines += [
            f"  - id: s{i}",
            "    uses: normalize",
            '    with: {text: "{{ inputs.text }}"}',
            f"    outputs: {{clean: clean_{i}, words: words_{i}}}",
        ]
        if i:
            lines.append(f"    needs: [{', '.join(f's{j}' for j in range(max(0, i - window), i))}]")
    return SCHEMA_LINE.format(kind="flow") + "\n".join(lines) + "\n"


def make_dense_yard(root: Path, steps: int) -> None:
    (root / "blocks").mkdir(parents=True)
    (root / "flows").mkdir()
    (root / "blocks" / "normalize.yaml").write_text(BLOCKS["normalize"], encoding="utf-8")
    (root / "flows" / "dense.yaml").write_text(dense_flow(steps), encoding="utf-8")


def dense(sizes: list[int], runs: int) -> dict[int, list[float]]:
    """Load and check a dense-needs flow of each size in-process (imports already done)."""
    from engine.definitions.project import load_project
    from engine.validate.semantic import check_project

    times: dict[int, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for steps in sizes:
            root = Path(scratch) / f"dense_{steps}"
            make_dense_yard(root, steps)
            for _ in range(runs):
                start = time.perf_counter()
                project = load_project(root)
                found = [*project.diagnostics, *check_project(project)]
                times.setdefault(steps, []).append(time.perf_counter() - start)
                if found:
                    raise SystemExit(
                        f"the dense flow of {steps} steps should be clean: {found[0].format()}"
                    )
    return times


def one_run(root: Path) -> dict[str, float | int]:
    """Runs inside a fresh process: imports first, then the timed work."""
    from engine.definitions.project import load_project
    from engine.validate.semantic import check_project

    start = time.perf_counter()
    project = load_project(root)
    loaded = time.perf_counter()
    found = [*project.diagnostics, *check_project(project)]
    done = time.perf_counter()
    return {
        "load_and_schema": loaded - start,
        "semantic": done - loaded,
        "total": done - start,
        "files": len(project.files),
        "problems": len(found),
    }


def bulk(root: Path, runs: int) -> list[dict[str, float | int]]:
    results = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(root)],
            capture_output=True,
            text=True,
            check=True,
            env=child_env(),
        )
        results.append(json.loads(out.stdout))
    return results


def cli_command() -> list[str]:
    script = Path(sys.executable).parent / "blockyard"  # the real console script, not a shell shim
    return [str(script)] if script.is_file() else [sys.executable, "-m", "engine"]


def cold_cli(runs: int) -> list[float]:
    command = [*cli_command(), "validate", "--root", str(REPO)]
    # warm the OS file cache, .pyc files
    subprocess.run(command, capture_output=True, check=False, env=child_env())
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, env=child_env()
        )
        times.append(time.perf_counter() - start)
        if result.returncode != 0:
            raise SystemExit(
                f"blockyard validate failed on the example yard:\n{result.stdout}{result.stderr}"
            )
    return times


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s (range {min(values):.3f}-{max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="bulk runs (default 5)")
    parser.add_argument("--cli-runs", type=int, default=10, help="cold CLI runs (default 10)")
    parser.add_argument("--flows", type=int, default=1000, help="generated flows (default 1000)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile", action="store_true", help="one in-process bulk run, for cProfile"
    )
    parser.add_argument(
        "--json", action="store_true", help="bulk and cold CLI medians as one JSON object"
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child)))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "yard"
        make_yard(root, args.flows)
        if args.profile:
            print(one_run(root))
            return 0
        results = bulk(root, args.runs)
    problems = results[0]["problems"]
    if args.json:
        print(
            json.dumps(
                {
                    "flows": args.flows,
                    "files": results[0]["files"],
                    "problems": problems,
                    "bulk_s": statistics.median(float(r["total"]) for r in results),
                    "cold_cli_s": statistics.median(cold_cli(args.cli_runs)),
                }
            )
        )
        return 0
    print(
        f"bulk: {results[0]['files']} files ({args.flows} flows), {problems} problems found"
        + ("" if problems == 0 else "  <- the generated yard should be clean")
    )
    for key in ("load_and_schema", "semantic", "total"):
        print(f"  {key:16} {_median([float(r[key]) for r in results])}")
    print(f"cold CLI: {' '.join(cli_command()[-1:])} validate (example yard), {args.cli_runs} runs")
    print(f"  {'total':16} {_median(cold_cli(args.cli_runs))}")
    print(f"dense needs: each step needs the 50 before it, {args.runs} runs")
    for steps, times in dense([200, 400, 800], args.runs).items():
        print(f"  {steps:4} steps       {_median(times)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
