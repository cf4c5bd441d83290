"""Gates inside map, foreach, loop and subflow bodies; several gates waiting at once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.approvals.conftest import decided, paused, snapshot
from tests.runtime.conftest import Outcome

Cli = Callable[..., Outcome]


def test_gates_in_map_items_wait_together_and_are_picked_with_gate(yard: Path, cli: Cli) -> None:
    run_id, gates = paused(cli(yard, "run", "fan", "--json"))
    assert sorted(g["data"]["value"]["gate"] for g in gates) == ["check[0]", "check[1]", "check[2]"]
    assert {g["step"] for g in gates} == {"check"}
    shown = cli(yard, "runs", "show", run_id).out
    for index, item in enumerate([1, 2, 3]):
        assert f"waiting   gate 'check[{index}]': Item {item}?" in shown
    assert f"decide    blockyard resume {run_id} --gate NAME --approve" in shown
    listed = cli(yard, "gates").out
    assert all(f"check[{i}]" in listed for i in range(3)) and run_id in listed

    before = snapshot(yard, run_id)
    ambiguous = cli(yard, "resume", run_id, "--approve")
    assert ambiguous.code == 2
    assert (
        f"run {run_id} waits at 3 gates (check[0], check[1], check[2]): pick one with --gate"
        in ambiguous.err
    )
    by_step = cli(yard, "resume", run_id, "--approve", "--gate", "check")
    assert by_step.code == 2 and f"gate 'check' of run {run_id} waits for 3 items" in by_step.err
    assert snapshot(yard, run_id) == before

    one = cli(
        yard, "resume", run_id, "--approve", "--gate", "check[1]", "--set", "extra=100", "--json"
    )
    assert one.code == 3, one.err  # the other two still wait
    assert sorted(
        g["data"]["value"]["gate"] for g in one.events() if g["type"] == "approval_required"
    ) == ["check[0]", "check[2]"]
    interrupt_id = next(
        g["data"]["interrupt_id"] for g in gates if g["data"]["value"]["gate"] == "check[2]"
    )
    # an id prefix works too
    two = cli(yard, "resume", run_id, "--reject", "--gate", interrupt_id[:8], "--json")
    assert two.code == 3
    last = cli(yard, "resume", run_id, "--approve", "--json")  # one gate left: no --gate needed
    assert last.code == 0, last.err
    # item 2 was rejected: its body ended at the gate, so its last result is the gate's (no values)
    assert last.events()[-1]["data"]["outputs"] == {"sums": [{"sum": 1}, {"sum": 102}, {}]}
    assert [d["gate"] for d in decided(yard, run_id)] == ["check[1]", "check[2]", "check[0]"]


def test_gates_in_foreach_and_loop_bodies(yard: Path, cli: Cli) -> None:
    run_id, gates = paused(cli(yard, "run", "iterate", "--json"))
    names = [gates[0]["data"]["value"]["gate"]]
    for _ in range(3):
        done = cli(yard, "resume", run_id, "--approve", "--json")
        assert done.code == 3, done.err
        names.append(paused(done)[1][0]["data"]["value"]["gate"])
    assert names == ["ok[0]", "ok[1]", "bump", "bump"]
    assert paused(done)[1][0]["data"]["value"]["message"] == "Round 1?"
    finished = cli(yard, "resume", run_id, "--approve", "--json")
    assert finished.code == 0, finished.err
    assert finished.events()[-1]["data"]["outputs"] == {"seen": [{"sum": 11}, {"sum": 21}], "n": 2}


def test_a_gate_inside_a_subflow(yard: Path, cli: Cli) -> None:
    run_id, gates = paused(cli(yard, "run", "outer", "--json"))
    assert (gates[0]["step"], gates[0]["data"]["value"]["message"]) == ("sub.confirm", "Inner 41?")
    done = cli(yard, "resume", run_id, "--approve", "--gate", "sub.confirm", "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == {"n": 42}
    body = json.loads(cli(yard, "runs", "show", run_id, "--json").out)
    assert [d["gate"] for d in body["decisions"]] == ["sub.confirm"]
