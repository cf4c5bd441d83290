"""Agents: what a turn of the loop costs, and whether sub-agents asked for in one turn overlap.

Runs go through `Yard.arun` (durable SQLite state, events, output checks), one at a time.

  turns       an agent that calls a tool in each of 9 turns, then answers, against one that
              answers at once, on the instant mock: the difference / 9 is one turn (model
              call, tool task, graph superstep) plus one tool call; and the same 10 turns by an
              agent that may wait for a person (`approve_tools` names a tool it never calls), whose
              loop keeps checkpoints of its own in the run's (docs/agents.md)
  fan-out     a coordinator asks K sub-agents in one turn; each sub-agent's model takes 200 ms
              (mock `delay`); parallel sub-agents finish in ~200 ms, not K x 200 ms
  openai      the same 2-turn agent (one tool call, then the answer) through ChatOpenAI and a
              loopback OpenAI-compatible server (tests/support/openai_stub.py), streamed

    python bench/bench_agents.py          # BENCH_ROUNDS=7 by default
    python bench/bench_agents.py --json   # turns and fan-out medians (ms) as one JSON object, no openai part
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _harness import header, make_yard, measure, median, rounds, table, timed

from engine import Yard

FANOUT = (1, 4, 8)
AGENT = """
    block: {name}
    kind: agent
    inputs: {{task: {{type: string, default: go}}}}
    outputs: {{answer: {{type: string}}}}
    prompt: {{user: "{{{{ task }}}}"}}
    model: {model}
    tools: [current_time]
    max_iterations: 10
    {extra}
"""


def mock_yard() -> Path:
    call = {"$tool_calls": [{"name": "current_time", "args": {}}]}
    models: dict[str, Any] = {
        "fast": {
            "provider": "mock",
            "replies": {
                "busy.work": [call] * 9 + ["done"],
                "waits.work": [call] * 9 + ["done"],
                "quick.work": ["done"],
            },
        },
        "slow": {"provider": "mock", "delay": "200ms"},
    }
    files = {
        "blocks/worker.yaml": AGENT.format(name="worker", model="fast", extra=""),
        "blocks/helper.yaml": AGENT.format(name="helper", model="slow", extra=""),
        "flows/busy.yaml": "flow: busy\noutputs: [answer]\nsteps:\n  - {id: work, uses: worker}\n",
        "flows/quick.yaml": "flow: quick\noutputs: [answer]\nsteps:\n  - {id: work, uses: worker}\n",
        # offered list_files, which needs a person and is never called: the loop keeps checkpoints
        "blocks/asker.yaml": AGENT.format(
            name="asker",
            model="fast",
            extra="tools: [current_time, list_files]\n    approve_tools: {list_files: [approve]}",
        ).replace("    tools: [current_time]\n", "", 1),
        "flows/waits.yaml": "flow: waits\noutputs: [answer]\nsteps:\n  - {id: work, uses: asker}\n",
    }
    for k in FANOUT:
        calls = [{"name": "helper", "args": {"task": f"t{i}"}} for i in range(k)]
        models[f"lead{k}"] = {
            "provider": "mock",
            "replies": {f"lead{k}": [{"$tool_calls": calls}, "done"]},
        }
        files[f"blocks/lead{k}.yaml"] = AGENT.format(
            name=f"lead{k}", model=f"lead{k}", extra="delegates: [helper]"
        )
        files[f"flows/fan{k}.yaml"] = (
            f"flow: fan{k}\noutputs: [answer]\nsteps:\n  - {{id: go, uses: lead{k}}}\n"
        )
    files["blockyard.yaml"] = json.dumps({"models": models})  # YAML 1.2 reads JSON
    return make_yard(files)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json", action="store_true", help="turns and fan-out medians (ms) as one JSON object"
    )
    as_json = parser.parse_args().json
    count = rounds(7)
    root = mock_yard()
    yard = Yard.load(root, state=root / "state.db")

    async def run(flow: str) -> float:
        async def go() -> None:
            result = await yard.arun(flow)
            assert result.ok, result.error

        return await timed(go)

    samples = await measure(
        {
            "1 turn": lambda: run("quick"),
            "10 turns": lambda: run("busy"),
            "10 turns, may wait": lambda: run("waits"),
        },
        count,
    )
    one, ten = median(samples["1 turn"]), median(samples["10 turns"])
    waits = median(samples["10 turns, may wait"])
    fanout = await measure({f"K={k}": (lambda k=k: run(f"fan{k}")) for k in FANOUT}, count)
    yard.close()
    if as_json:
        print(
            json.dumps(
                {
                    "turn_ms": (ten - one) / 9 * 1000,
                    "fanout_ms": {str(k): median(fanout[f"K={k}"]) * 1000 for k in FANOUT},
                }
            )
        )
        return
    header("turns (instant mock)")
    print(
        table(
            ["run", "median"],
            [
                ["1 turn (answer at once)", f"{one * 1000:.1f} ms"],
                ["10 turns (9 tool calls)", f"{ten * 1000:.1f} ms"],
                ["per turn + tool call", f"{(ten - one) / 9 * 1000:.2f} ms"],
                ["10 turns, a loop that may wait (approve_tools)", f"{waits * 1000:.1f} ms"],
                ["its checkpoints, per turn", f"{(waits - ten) / 10 * 1000:.2f} ms"],
            ],
        )
    )

    header("fan-out: K sub-agents in one turn, 200 ms model each")
    print(
        table(
            ["K", "median wall", "sequential would be"],
            [
                [str(k), f"{median(fanout[f'K={k}']) * 1000:.0f} ms", f"{k * 200} ms +"]
                for k in FANOUT
            ],
        )
    )

    from support.openai_stub import OpenAIStub, Reply

    with OpenAIStub() as stub:
        stub.default = Reply.dynamic(
            lambda request: (
                Reply.tool_call("current_time", {})
                if len(request.messages) < 2
                else Reply.tool_call("final_answer", {"answer": "ok"})
            )
        )
        real = make_yard(
            {
                "blockyard.yaml": f"models:\n  default: {{provider: openai, name: m, base_url: '{stub.base_url}'}}\n",
                "blocks/worker.yaml": AGENT.format(name="worker", model="default", extra=""),
                "flows/ask.yaml": "flow: ask\noutputs: [answer]\nsteps:\n  - {id: work, uses: worker}\n",
            }
        )
        yard = Yard.load(real, state=real / "state.db", env={})

        async def ask() -> float:
            async def go() -> None:
                result = await yard.arun("ask")
                assert result.ok, result.error

            return await timed(go)

        header("openai: 2 turns through ChatOpenAI and a loopback server (streamed)")
        samples = await measure({"ask": ask}, count)
        print(
            table(
                ["run", "median"],
                [["2 turns, 1 tool call", f"{median(samples['ask']) * 1000:.1f} ms"]],
            )
        )
        yard.close()


if __name__ == "__main__":
    asyncio.run(main())
