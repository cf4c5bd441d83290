"""Durability modes (docs/runtime.md, "Durability"): sync, async, exit and none, chosen per run, per
flow and in blockyard.yaml; what each keeps, what each refuses, and what a kill -9 costs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph.state import CompiledStateGraph

from engine.core.errors import UsageError
from engine.runtime.direct_runs import plan_for
from engine.runtime.yard import Yard
from engine.state.durable import GroupCommitted
from tests.runtime.conftest import BLOCKS, FLOWS, Outcome, spawn
from tests.runtime.test_resume import _read_until, started_steps
from tests.support.example import copy_example_yard
from tests.support.state import state_db

Cli = Callable[..., Outcome]
MakeYard = Callable[[dict[str, str]], Path]

OWN_MODE = {
    "flows/quick.yaml": """
        flow: quick
        durability: exit
        inputs: {n: {type: integer}}
        outputs: [n]
        steps:
          - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: b, uses: inc}
    """,
    "flows/quiet.yaml": """
        flow: quiet
        durability: none
        trace: false
        inputs: {n: {type: integer}}
        outputs: [n]
        steps:
          - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}}
    """,
}


def _checkpoints(root: Path, run_id: str) -> int:
    with state_db(root) as conn:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (run_id,)
            ).fetchone()[0]
        )


def _row(root: Path, run_id: str) -> tuple[Any, ...]:
    with state_db(root) as conn:
        found = conn.execute(
            "SELECT durability, status FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
    assert found is not None
    return tuple(found)


def _events(root: Path, run_id: str) -> list[str]:
    with state_db(root) as conn:
        return [
            row[0]
            for row in conn.execute(
                "SELECT type FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
            )
        ]


def test_each_mode_runs_the_flow_and_keeps_what_it_promises(
    yard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: dict[str, int] = {}
    aput = GroupCommitted.aput

    async def counted(self: GroupCommitted, config: Any, *args: Any, **kwargs: Any) -> Any:
        thread = config["configurable"]["thread_id"]
        written[thread] = written.get(thread, 0) + 1
        return await aput(self, config, *args, **kwargs)

    monkeypatch.setattr(GroupCommitted, "aput", counted)
    # calc step by step: LangGraph's loop in every mode (calc's own `sync` and `async` runs go without
    # it, their steps' rows all a resume needs: engine/runtime/direct_runs.py)
    (yard / "flows" / "stepwise.yaml").write_text(
        (yard / "flows" / "calc.yaml")
        .read_text()
        .replace("flow: calc", "flow: stepwise\ninline: false")
    )
    with Yard.load(yard) as api:
        results = {
            mode: api.run("calc", {"n": 3}, durability=mode)
            for mode in ("sync", "async", "exit", "none")
        }
        stepwise = {
            mode: api.run("stepwise", {"n": 3}, durability=mode) for mode in ("sync", "async")
        }
    for mode, result in [*results.items(), *stepwise.items()]:
        assert (result.status, result.outputs) == ("finished", {"n": 4, "label": "small"}), mode
        assert _row(yard, result.run_id) == (mode, "finished")
        assert (
            _events(yard, result.run_id)[0] == "run_started"
            and _events(yard, result.run_id)[-1] == "run_finished"
        )
    made = {mode: written.get(result.run_id, 0) for mode, result in results.items()}
    assert made == {"sync": 0, "async": 0, "exit": 1, "none": 0}  # exit: the one it ended with
    made_stepwise = [written.get(result.run_id, 0) for result in stepwise.values()]
    assert made_stepwise[0] == made_stepwise[1] > 2  # one per superstep
    # a finished run keeps its last checkpoint only (docs/runtime.md, "What a finished run keeps")
    kept = {mode: _checkpoints(yard, result.run_id) for mode, result in results.items()}
    assert kept == {"sync": 0, "async": 0, "exit": 1, "none": 0}
    assert [_checkpoints(yard, result.run_id) for result in stepwise.values()] == [1, 1]


def test_the_run_wins_over_the_flow_which_wins_over_the_yard(make_yard: MakeYard) -> None:
    root = make_yard(
        {
            **BLOCKS,
            "flows/calc.yaml": FLOWS["flows/calc.yaml"],
            **OWN_MODE,
            "blockyard.yaml": "durability: async\n",
        }
    )
    with Yard.load(root) as api:
        by_yard = api.run("calc", {"n": 1})
        by_flow = api.run("quick", {"n": 1})
        by_run = api.run("quick", {"n": 1}, durability="sync")
        quiet = api.run("quiet", {"n": 1})
        traced = api.run("quiet", {"n": 1}, trace=True)
    assert [_row(root, r.run_id)[0] for r in (by_yard, by_flow, by_run, quiet)] == [
        "async",
        "exit",
        "sync",
        "none",
    ]
    assert quiet.outputs == {"n": 2} and _row(root, quiet.run_id) == ("none", "finished")
    assert _events(root, quiet.run_id) == []  # trace: false: the run row only
    assert _events(root, traced.run_id)[-1] == "run_finished"


def test_without_a_mode_anywhere_runs_are_sync(yard: Path, cli: Cli) -> None:
    with Yard.load(yard) as api:
        result = api.run("calc", {"n": 1})
    assert _row(yard, result.run_id)[0] == "sync"
    shown = cli(yard, "runs", "show", result.run_id)
    assert "durability sync\n" in shown.out
    assert (
        json.loads(cli(yard, "runs", "show", result.run_id, "--json").out)["run"]["durability"]
        == "sync"
    )


def test_none_refuses_gates_and_conversation_turns(yard: Path, cli: Cli) -> None:
    with Yard.load(yard) as api:
        with pytest.raises(UsageError, match="step 'ok' is an approval gate"):
            api.run("gated", {"n": 1}, durability="none")
        with pytest.raises(UsageError, match="conversation turn with durability none"):
            api.run("calc", {"n": 1}, durability="none", thread="t1")
        with pytest.raises(
            UsageError, match="durability must be one of sync, async, exit, none, not 'fast'"
        ):
            api.run("calc", {"n": 1}, durability="fast")
        assert api.runs() == []  # nothing recorded
    refused = cli(yard, "run", "gated", "--durability", "none")
    assert refused.code == 2
    assert refused.err.strip().splitlines() == [
        "error: flow 'gated' cannot run with durability none: step 'ok' is an approval gate, and a run keeps no "
        "checkpoint to wait at in that mode (use sync, async or exit)"
    ]
    untraced = cli(yard, "run", "calc", "--input", "n=1", "--no-trace")
    assert (
        untraced.code == 2
        and "only with durability none" in untraced.err
        and "Traceback" not in untraced.err
    )


def test_exit_mode_pauses_at_a_gate_and_goes_on_after_the_decision(yard: Path, cli: Cli) -> None:
    waiting = cli(yard, "run", "gated", "--input", "n=1", "--durability", "exit", "--json")
    assert waiting.code == 3, waiting.err
    run_id = waiting.events()[-1]["run_id"]
    assert _checkpoints(yard, run_id) == 1  # saved as the graph stopped at the gate
    done = cli(yard, "resume", run_id, "--approve", "--json")
    assert done.code == 0, done.err
    assert started_steps(done.events()) == [
        "ok",
        "b",
    ]  # the gate takes its decision; `a` ran before it: not again
    assert done.events()[-1]["data"]["outputs"] == {"n": 3}
    assert _row(yard, run_id) == ("exit", "finished")


def test_a_failed_exit_run_resumes_from_where_it_failed(yard: Path, cli: Cli) -> None:
    failed = cli(yard, "run", "fragile", "--durability", "exit", "--json")
    assert failed.code == 1
    run_id = failed.events()[-1]["run_id"]
    (yard / "fixed.flag").write_text("")
    done = cli(yard, "resume", run_id, "--json")
    assert done.code == 0, done.err
    assert started_steps(done.events()) == [
        "boom"
    ]  # LangGraph saved the failing superstep's checkpoint


def test_a_failed_none_run_cannot_be_resumed(yard: Path, cli: Cli) -> None:
    failed = cli(yard, "run", "fragile", "--durability", "none")
    assert failed.code == 1
    assert (
        "it kept no checkpoint (durability none): after fixing the cause, run it again"
        in failed.err
    )
    assert "blockyard resume" not in failed.err
    run_id = failed.err.split("error: run ", 1)[1].split()[0]
    shown = cli(yard, "runs", "show", run_id)
    assert (
        "durability none (no checkpoints: cannot be resumed)" in shown.out
        and "resume    " not in shown.out
    )
    refused = cli(yard, "resume", run_id)
    assert refused.code == 2
    assert refused.err.strip() == (
        f"error: run {run_id} cannot be resumed: it ran with durability none and kept "
        "no checkpoint; start a new run of flow 'fragile'"
    )


def test_async_run_killed_with_kill_9_resumes_and_runs_at_most_the_last_finished_step_again(
    yard: Path, cli: Cli
) -> None:
    child = spawn(yard, "run", "crashy", "--input", "n=4", "--durability", "async", "--json")
    try:  # killed as soon as `first` has finished: its checkpoint may or may not be written yet
        lines = _read_until(
            child.stdout, lambda line: '"step_finished"' in line and '"first"' in line
        )
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    run_id = json.loads(lines[0])["run_id"]
    # in this process: the killed one is gone either way
    done = cli(yard, "resume", run_id, "--json")
    assert done.code == 0, done.err
    again = started_steps(done.events())
    assert again in (
        ["nap", "last"],
        ["first", "nap", "last"],
    )  # `first` at most twice; nothing else repeated
    assert done.events()[-1]["data"]["outputs"] == {"n": 5, "label": "small"}
    assert _row(yard, run_id) == ("async", "finished")


def test_exit_run_killed_with_kill_9_kept_nothing_to_resume(yard: Path, cli: Cli) -> None:
    child = spawn(yard, "run", "crashy", "--durability", "exit", "--json")
    try:
        lines = _read_until(child.stdout, lambda line: '"step_started"' in line and '"nap"' in line)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    run_id = json.loads(lines[0])["run_id"]
    refused = cli(yard, "resume", run_id)
    assert refused.code == 2
    assert refused.err.strip() == (
        f"error: run {run_id} cannot be resumed: it ran with durability exit and "
        "stopped before it kept a checkpoint; start a new run of flow 'crashy'"
    )


def test_an_interrupted_exit_run_keeps_its_checkpoint_and_resumes(yard: Path) -> None:
    async def main() -> list[str | None]:
        async with Yard.load(yard) as api:
            napping = asyncio.Event()

            async def consume() -> None:
                async for event in api.astream("crashy", {"n": 1}, run_id="cut", durability="exit"):
                    if event.type == "step_started" and event.step == "nap":
                        napping.set()

            run = asyncio.ensure_future(consume())
            await napping.wait()
            run.cancel()  # as Ctrl-C does
            with pytest.raises(asyncio.CancelledError):
                await run
            assert _checkpoints(yard, "cut") == 1  # saved as the cancelled graph exited
            result = await api.aresume("cut")
            assert (result.status, result.outputs) == ("finished", {"n": 2, "label": "small"})
            return [e.step for e in api.events("cut") if e.type == "step_started"]

    assert asyncio.run(main()) == ["first", "nap", "nap", "last"]  # only the interrupted step again


def test_a_none_run_stores_its_trace_while_it_runs(yard: Path) -> None:
    # a none run's rows wait for no checkpoint: those of `first` are stored while `nap` sleeps (1 s),
    # not only with the run's end (docs/runtime.md: within 50 ms)
    async def main() -> None:
        async with Yard.load(yard) as api:
            seen: list[str] = []
            async for event in api.astream("crashy", {"n": 4}, durability="none", run_id="q"):
                if event.type == "step_started" and event.step == "nap":
                    began = time.monotonic()
                    while "step_finished" not in seen and time.monotonic() - began < 0.5:
                        await asyncio.sleep(0.01)
                        seen = _events(yard, "q")
                    # first's two rows (and nap's start), while nap sleeps
                    assert seen[:3] == ["run_started", "step_started", "step_finished"]
                    assert seen.count("step_finished") == 1
            assert event.type == "run_finished"
            assert _events(yard, "q")[-1] == "run_finished" and len(_events(yard, "q")) == 8

    asyncio.run(main())


# the example yard's flows that run without a person or a thread, and their inputs
EXAMPLE_INPUTS: dict[str, dict[str, Any]] = {
    "hello": {"name": "Ada"},
    "triage_ticket": {"ticket": "My invoice is wrong"},
    "write_article": {"topic": "bees"},
    "summarize_batch": {"documents": ["one", "two"]},
    "tldr": {"text": "Some text to shorten."},
    "research": {"question": "Why is the sky blue?"},
    "team_report": {},
    "swe_team": {"prompt": "Build an MVP for a todo-list app"},
}


TIMINGS = ("duration_ms", "now", "latency_ms", "ttft_ms")


def _trace(api: Yard, run_id: str) -> list[tuple[str, str | None, Any]]:
    def plain(
        value: Any,
    ) -> Any:  # without timings (of steps, model calls) and the clock tool's reading (`stamp`)
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items() if key not in TIMINGS}
        return [plain(item) for item in value] if isinstance(value, list) else value

    # in order per step, item and tool call: team_report's sub-agents, swe_team's map items and an
    # agent's tool calls run at once, so their events interleave differently from one run to the
    # next in any mode
    events = [
        (str(e.type), e.step, plain(e.data))
        for e in api.events(run_id)
        if e.type not in ("run_started", "run_finished")
    ]
    return sorted(
        events,
        key=lambda event: (
            str(event[1]),
            str(event[2].get("index", "")),
            str(event[2].get("call_id", "")),
        ),
    )


@pytest.mark.parametrize("flow", sorted(EXAMPLE_INPUTS))
def test_a_none_run_records_the_trace_and_outputs_of_a_sync_run(flow: str, tmp_path: Path) -> None:
    # A none run's graph runs steps inline where it can (engine/compile/inline.py); what it records
    # is what the same run records step by step (the mock model's replies depend on the block and its
    # inputs only). Exact order: tests/compile/test_compile_run_inline.py.
    traces, outputs = {}, {}
    with Yard.load(copy_example_yard(tmp_path / "yard")) as api:
        for mode in ("sync", "none"):
            result = api.run(flow, EXAMPLE_INPUTS[flow], durability=mode)
            assert result.status == "finished", (mode, result.error)
            traces[mode], outputs[mode] = _trace(api, result.run_id), result.outputs
    assert outputs["none"] == outputs["sync"]
    assert traces["none"] == traces["sync"]


# a chain, sub-agents (their graphs and the subflows they delegate to, nested in the run's node),
# and a flow whose graph needs LangGraph's loop
@pytest.mark.parametrize("flow", ["hello", "team_report", "research"])
def test_an_engine_run_goes_without_langgraph_when_its_graph_allows(
    flow: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangGraph's loop of the run's graph is never entered in a run of a flow whose graph allows it
    # (engine/runtime/direct_runs.py; the outputs and trace of `none` against `sync`: the test above)
    entered: list[str] = []
    astream = CompiledStateGraph.astream

    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        entered.append(self.name)
        return astream(self, *args, **kwargs)

    monkeypatch.setattr(CompiledStateGraph, "astream", watched)
    with Yard.load(copy_example_yard(tmp_path / "yard")) as api:
        for mode in ("none", "sync"):
            compiled = api.engine.compiled(api.bundle(flow), durable=mode == "sync", inline=True)
            result = api.run(flow, EXAMPLE_INPUTS[flow], durability=mode)
            assert result.status == "finished", result.error
            assert (flow in entered) == (plan_for(compiled, mode, None) is None), (mode, entered)
            entered.clear()
        # hello's steps go without LangGraph in both; team_report's agents write `messages`, which a
        # durable run keeps in LangGraph's checkpoints; research needs LangGraph's loop
        assert (plan_for(compiled, "sync", None) is not None) == (flow == "hello")
