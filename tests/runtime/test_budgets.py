"""Budgets at run time (docs/observability.md, "Budgets"): the model call a budget no longer allows is
refused, the call that passes a limit fails its step with the limit named, the run is recorded failed
and goes on after the limit is raised (`blockyard resume --budget`, in a process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.runtime.yard import Yard

Yard_ = Callable[[dict[str, str]], Path]

# the agent calls a tool four times, then answers: five model calls when nothing stops it
REPLIES = (
    "{dig: [{$tool_calls: [{name: current_time, args: {}}]}, {$tool_calls: [{name: current_time, args: {}}]},"
    " {$tool_calls: [{name: current_time, args: {}}]}, {$tool_calls: [{name: current_time, args: {}}]},"
    " {answer: found it}]}"
)

FILES = {
    "blocks/note.yaml": """
        block: note
        kind: llm
        inputs: {topic: {type: string}}
        outputs: {text: {type: string}}
        prompt: {user: "Write a note about {{ topic }}."}
    """,
    "blocks/digger.yaml": """
        block: digger
        kind: agent
        tools: [current_time]
        max_iterations: 10
        inputs: {task: {type: string}}
        outputs: {answer: {type: string}}
        prompt: {user: "{{ task }}"}
    """,
}


def loopy(budget: str) -> str:
    return f"""
        flow: loopy
        inputs: {{topic: {{type: string, default: tides}}}}
        outputs: [answer]
        {budget}
        steps:
          - {{id: first, uses: note}}
          - {{id: dig, uses: digger, with: {{task: "{{{{ context.text }}}}"}}}}
    """


def config(extra: str = "", pricing: str = "") -> str:
    return f"models:\n  default:\n    provider: mock\n    replies: {REPLIES}\n{pricing}{extra}"


def _resume(root: Path, run_id: str, *budget: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "engine", "resume", run_id, "--json", "--root", str(root)]
    for pair in budget:
        args += ["--budget", pair]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_an_agent_looping_past_its_budget_fails_at_its_step_and_resumes_with_a_raised_one(
    make_yard: Yard_,
) -> None:
    root = make_yard(
        {**FILES, "blockyard.yaml": config(), "flows/loopy.yaml": loopy("budget: {model_calls: 4}")}
    )
    with Yard.load(root) as yard:
        failed = yard.run("loopy")
        events = yard.events(failed.run_id)
        found = yard.get_run(failed.run_id)
    assert found is not None
    record = found
    assert (failed.status, failed.step) == ("failed", "dig")
    assert failed.error == (
        "the run's budget is exceeded: model_calls: 4 model calls made, the limit is 4 (so far 4 "
        f"model calls, {record.input_tokens + record.output_tokens:,} tokens, cost $0); raise the "
        f"limit and resume the run: blockyard resume {failed.run_id} --budget model_calls=N"
    )
    calls = [e for e in events if e.type == "model_call"]
    assert [(e.step, e.data["purpose"]) for e in calls] == [
        ("first", "block"),
        ("dig", "agent"),
        ("dig", "agent"),
        ("dig", "agent"),
    ]
    assert record.model_calls == 4 and record.budget == {"model_calls": 4}
    assert record.input_tokens == sum(e.data["input_tokens"] for e in calls) > 0

    refused = _resume(root, failed.run_id, "model_calls=many")
    assert (
        refused.returncode == 2
        and "--budget 'model_calls=many': model_calls is a number" in refused.stderr
    )

    done = _resume(root, failed.run_id, "model_calls=20")
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["type"] == "run_finished" and last["data"]["outputs"] == {"answer": "found it"}
    with Yard.open(root) as yard:
        again = yard.get_run(failed.run_id)
        traced = [e for e in yard.events(failed.run_id) if e.type == "model_call"]
    assert again is not None
    record = again
    # the raised budget is the run's from now on; its totals count every execution's calls
    assert record.budget == {"model_calls": 20}
    assert record.model_calls == len(traced) > 4


def test_the_call_that_passes_a_token_or_cost_limit_fails_the_step_after_it(
    make_yard: Yard_,
) -> None:
    pricing = (
        "    pricing: {input_per_mtok: 1000000, output_per_mtok: 2000000}\n"  # $1 and $2 per token
    )
    root = make_yard(
        {
            **FILES,
            "blockyard.yaml": config(pricing=pricing),
            "flows/loopy.yaml": loopy("budget: {cost_usd: 25}"),
        }
    )
    with Yard.load(root) as yard:
        failed = yard.run("loopy")
        calls = [e.data for e in yard.events(failed.run_id) if e.type == "model_call"]
        record = yard.get_run(failed.run_id)
    assert record is not None
    first = calls[0]
    assert first["cost_usd"] == first["input_tokens"] * 1.0 + first["output_tokens"] * 2.0
    assert first["price_source"] == "profile"
    spent = sum(call["cost_usd"] for call in calls)
    assert spent > 25 and spent - calls[-1]["cost_usd"] <= 25  # the last call passed the limit
    assert record.cost_usd == pytest.approx(spent) and record.unpriced_calls == 0
    assert failed.error is not None and "the run's budget is exceeded: cost_usd: $" in failed.error
    assert (
        f"the run's budget is exceeded: cost_usd: ${spent:,.2f} spent, the limit is $25.00"
        in failed.error
    )


def test_the_yard_default_applies_key_by_key_under_the_flows_own(make_yard: Yard_) -> None:
    root = make_yard(
        {
            **FILES,
            "blockyard.yaml": config("budget: {model_calls: 1, tokens: 100000}\n"),
            "flows/loopy.yaml": loopy(""),
            "flows/roomy.yaml": loopy("budget: {model_calls: 50}").replace(
                "flow: loopy", "flow: roomy"
            ),
        }
    )
    with Yard.load(root) as yard:
        held = yard.run("loopy")
        roomy = yard.run("roomy")
        stored = getattr(yard.get_run(roomy.run_id), "budget", None)
    assert (
        held.status == "failed"
        and held.step == "dig"
        and "model_calls: 1 model calls made" in str(held.error)
    )
    assert roomy.status == "finished"
    assert stored == {
        "model_calls": 50,
        "tokens": 100000,
    }  # the flow's key wins, the yard's others stay


CHAT = {
    "blocks/reply.yaml": """
        block: reply
        kind: llm
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {user: "{{ message }}"}
    """,
    "flows/chat.yaml": """
        flow: chat
        inputs: {message: {type: string}}
        outputs: [reply]
        budget: {model_calls: 3, per_turn: {model_calls: 2}}
        steps:
          - {id: think, uses: reply, outputs: {reply: draft}}
          - {id: talk, uses: reply, with: {message: "{{ context.draft }}"}}
    """,
}


def test_a_thread_is_held_to_its_budget_over_its_turns_and_each_turn_to_per_turn(
    make_yard: Yard_,
) -> None:
    root = make_yard(CHAT)
    with Yard.load(root) as yard:
        first = yard.run("chat", {"message": "hello"}, thread="t1")
        second = yard.run("chat", {"message": "again"}, thread="t1")
    assert first.status == "finished"  # two calls: within the turn's 2 and the thread's 3
    assert second.status == "failed" and second.step == "talk"  # the thread's fourth call
    assert (
        "the thread's budget is exceeded: model_calls: 3 model calls made, the limit is 3"
        in str(second.error)
    )
