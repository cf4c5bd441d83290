"""Pause, decide, go on: approve with values, reject to a step / end / fail, and every refused
decision — refused with one clear message, changing nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.approvals.conftest import decided, paused, snapshot
from tests.runtime.conftest import Outcome, run_engine

Cli = Callable[..., Outcome]


def test_pause_then_approve_with_values_in_another_process(yard: Path, cli: Cli) -> None:
    first = cli(yard, "run", "pay", "--input", "amount=30", "--json")
    run_id, gates = paused(first)
    request = gates[0]["data"]["value"]
    assert (gates[0]["step"], request["message"]) == ("ask", "Pay 30 plus a tip?")
    assert request["approvers"] == ["ada", "grace"]
    assert request["fields"] == {
        "tip": {"type": "integer", "description": "The tip."},
        "memo": {"type": "string", "default": "thanks"},
    }
    assert "is waiting for approval at gate 'ask': Pay 30 plus a tip?" in first.err
    assert "fields: tip (integer), memo (string, optional)" in first.err
    assert (
        f"decide: blockyard resume {run_id} --approve [--set FIELD=VALUE]... | --reject"
        in first.err
    )

    done = run_engine(
        yard,
        "resume",
        run_id,
        "--approve",
        "--set",
        "tip=5",
        "--set",
        "memo=007",
        "--as",
        "grace",
        "--reason",
        "fair",
        "--json",
    )
    assert done.code == 0, done.err
    events = done.events()
    assert [e["type"] for e in events[:2]] == ["approval_decided", "run_started"]
    assert events[0]["data"] == {
        "gate": "ask",
        "interrupt_id": gates[0]["data"]["interrupt_id"],
        "decision": "approve",
        "values": {"tip": 5, "memo": "007"},
        "actor": "grace",
        "reason": "fair",
        "time": events[0]["time"],
        "timed_out": False,
    }
    assert events[-1]["data"]["outputs"] == {
        "sum": 35,
        "note": "007",
    }  # memo stays text: a string field

    shown = cli(yard, "runs", "show", run_id)
    assert "decided   gate 'ask': approved by grace at " in shown.out
    assert '{"tip":5,"memo":"007"} (fair)' in shown.out
    trace = [
        e["type"] for e in json.loads(cli(yard, "runs", "show", run_id, "--json").out)["events"]
    ]
    assert trace.count("approval_required") == 1 and trace.count("approval_decided") == 1


def test_a_decision_is_decision_approve_or_reject_with_approve_and_reject_as_aliases(
    yard: Path, cli: Cli
) -> None:
    run_id, _ = paused(cli(yard, "run", "ends", "--json"))
    mixed = cli(yard, "resume", run_id, "--decision", "reject", "--approve")
    assert (mixed.code, mixed.err.strip()) == (
        2,
        "error: decision 'reject' and approve=true disagree: give one of them",
    )
    done = cli(yard, "resume", run_id, "--decision", "approve", "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == {"n": 2}
    assert decided(yard, run_id)[0]["decision"] == "approve"
    other, _ = paused(cli(yard, "run", "ends", "--json"))
    # the alias agreeing is fine
    both = cli(yard, "resume", other, "--decision", "reject", "--reject", "--json")
    assert both.code == 0 and decided(yard, other)[0]["decision"] == "reject"
    unknown = cli(yard, "resume", other, "--decision", "maybe")
    assert unknown.code == 2 and "'maybe' is not one of 'approve', 'reject'" in unknown.err


def test_reject_goes_to_on_reject(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "pay", "--json"))
    done = cli(yard, "resume", run_id, "--reject", "--as", "ada", "--reason", "too much", "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == {"sum": 0, "note": "refused"}
    assert decided(yard, run_id)[0]["decision"] == "reject"
    assert [e["step"] for e in done.events() if e["type"] == "step_started"] == [
        "ask",
        "refused",
        "zero",
    ]


def test_reject_ends_the_run_or_fails_it(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "ends", "--json"))
    done = cli(yard, "resume", run_id, "--reject", "--json")
    assert done.code == 0 and done.events()[-1]["data"]["outputs"] == {"n": 1}  # `second` never ran

    run_id, gates = paused(cli(yard, "run", "guarded", "--json"))
    assert (gates[0]["step"], gates[0]["data"]["value"]["message"]) == ("second", "Bump 1 again?")
    failed = cli(yard, "resume", run_id, "--reject", "--as", "bob", "--reason", "no", "--json")
    assert failed.code == 1
    last = failed.events()[-1]
    assert (last["type"], last["step"], last["data"]["error"]) == (
        "run_failed",
        "second",
        "rejected by bob: no",
    )
    assert f"run {run_id} failed at step 'second': rejected by bob: no" in failed.err


def test_require_approval_runs_the_step_once_after_the_gate(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "guarded", "--json"))
    done = cli(yard, "resume", run_id, "--approve", "--json")
    assert done.code == 0 and done.events()[-1]["data"]["outputs"] == {"n": 2}
    starts = [
        e["step"]
        for e in json.loads(cli(yard, "runs", "show", run_id, "--json").out)["events"]
        if e["type"] == "step_started"
    ]
    assert starts == ["first", "second"]  # nothing before the gate ran again


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--approve", "--set", "tip=5"],
            "gate 'ask' may only be decided by ada, grace: say who you are with --as NAME",
        ),
        (
            ["--approve", "--set", "tip=5", "--as", "mallory"],
            "'mallory' may not decide gate 'ask': its approvers are ada, grace",
        ),
        (
            ["--approve", "--set", "tip=five", "--as", "ada"],
            "gate 'ask': field 'tip' must be an integer, got string 'five'",
        ),
        (
            ["--approve", "--set", "tpi=5", "--as", "ada"],
            "gate 'ask' has no field 'tpi' (did you mean 'tip'?); its fields: tip, memo",
        ),
        (["--approve", "--as", "ada"], "gate 'ask' needs field 'tip' to approve (--set tip=...)"),
        (
            ["--approve", "--set", "tip=1", "--as", "ada", "--gate", "akс"],
            "has no gate 'akс' waiting",
        ),
        (["--approve", "--set", "tip"], "--set 'tip': expected FIELD=VALUE"),
        (["--reason", "why"], "--reason needs a decision: --approve or --reject"),
        ([], "is waiting for an approval: decide it with"),
    ],
)
def test_refused_decisions_change_nothing(
    yard: Path, cli: Cli, args: list[str], message: str
) -> None:
    run_id, _ = paused(cli(yard, "run", "pay", "--json"))
    before = snapshot(yard, run_id)
    refused = cli(yard, "resume", run_id, *args)
    assert refused.code == 2
    assert message in refused.err and "Traceback" not in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    assert snapshot(yard, run_id) == before


def test_decisions_on_runs_that_do_not_wait_are_refused(yard: Path, cli: Cli) -> None:
    run_id, _ = paused(cli(yard, "run", "ends", "--json"))
    assert cli(yard, "resume", run_id, "--approve").code == 0
    before = snapshot(yard, run_id)
    # a second decision: the gate's own refusal first
    again = cli(yard, "resume", run_id, "--approve")
    assert again.code == 2
    assert again.err.startswith(f"error: gate 'gate' of run {run_id} was already approved at "), (
        again.err
    )
    assert again.err.strip().endswith(
        f"; run {run_id} is finished, not waiting for an approval decision"
    )
    named = cli(yard, "resume", run_id, "--reject", "--gate", "gate")
    assert named.code == 2 and "is finished, not waiting" in named.err
    assert snapshot(yard, run_id) == before
    unknown = cli(yard, "resume", "nope", "--approve")
    assert (unknown.code, unknown.err.strip()) == (2, "error: unknown run 'nope'")


def test_a_second_decision_on_a_decided_gate_is_refused(yard: Path, cli: Cli) -> None:
    run_id, gates = paused(cli(yard, "run", "iterate", "--json"))  # waits at ok[0], then at ok[1]
    assert gates[0]["data"]["value"]["gate"] == "ok[0]"
    assert (
        paused(cli(yard, "resume", run_id, "--approve", "--as", "ada", "--json"))[1][0]["data"][
            "value"
        ]["gate"]
        == "ok[1]"
    )
    before = snapshot(yard, run_id)
    again = cli(yard, "resume", run_id, "--reject", "--gate", "ok[0]")
    assert again.code == 2
    assert again.err.startswith(
        f"error: gate 'ok[0]' of run {run_id} was already approved by ada at "
    )
    assert snapshot(yard, run_id) == before


def test_python_api_decisions(yard: Path) -> None:
    from engine import Yard
    from engine.spec.decisions import DecisionRefused

    with Yard.load(yard) as api:
        waiting = api.run("pay", {"amount": 1})
        assert (waiting.status, waiting.step, waiting.exit_code) == ("waiting", "ask", 3)
        with pytest.raises(DecisionRefused, match="values given without a decision"):
            api.resume(waiting.run_id, values={"tip": 1})
        result = api.resume(waiting.run_id, approve=True, values={"tip": 2}, actor="ada")
        assert (result.status, result.outputs) == ("finished", {"sum": 3, "note": "thanks"})
        (gate,) = api.gates(waiting.run_id)
        assert gate.decision is not None
        assert (gate.status, gate.actor, gate.decision["values"]) == (
            "approved",
            "ada",
            {"tip": 2, "memo": "thanks"},
        )
        assert api.gates() == []  # nothing waits any more


def test_the_graph_shows_gates_and_their_exits(yard: Path, cli: Cli) -> None:
    drawn = cli(yard, "graph", "timed").out
    assert 'by_step{{"by_step<br/>approval"}}' in drawn
    assert (
        'by_step -.->|"reject"| nope' in drawn and 'by_step -.->|"timeout 10ms"| escalate' in drawn
    )
    guarded = cli(yard, "graph", "guarded").out
    assert 'second["second<br/>transform inc, after approval"]' in guarded
    assert "reject" not in guarded  # on_reject: fail has no edge
