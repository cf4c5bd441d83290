"""Steps run one after another inside one LangGraph node in a run with checkpoints
(engine/compile/inline.py, engine/state/journal.py): in `sync`, each step's update is committed,
with its trace rows, before the next step begins; in `async` while the next one runs; in `exit`
only when the run stops. A run that fails (or is killed: tests/runtime/test_resume.py) goes on
after the last step it kept, and a finished run keeps no such rows."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import Yard
from engine.state.journal import item_next, restored, step_row
from tests.runtime.conftest import BLOCKS, CONFIG, FLOWS
from tests.support.state import state_db

RELAY = {
    "blocks/doze.yaml": """
        block: doze
        kind: wait
        duration: 300ms
    """,
    "flows/relay.yaml": """
        flow: relay
        inputs: {n: {type: integer, default: 1}}
        outputs: [n, echo]
        steps:
          - {id: one, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: two, uses: inc}
          - {id: doze, uses: doze}
          - {id: boom, uses: explode, with: {text: "n={{ context.n }}"}}
    """,
    "flows/inner.yaml": """
        flow: inner
        inputs: {n: {type: integer}}
        outputs: [n, echo]
        steps:
          - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: b, uses: inc}
          - {id: boom, uses: explode, with: {text: "n={{ context.n }}"}}
    """,
    "flows/outer.yaml": """
        flow: outer
        inputs: {n: {type: integer, default: 1}}
        outputs: [n, echo]
        steps:
          - {id: pre, uses: inc, with: {n: "{{ inputs.n }}"}}
          - {id: sub, flow: inner, with: {n: "{{ context.n }}"}}
          - {id: post, uses: inc}
    """,
}


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(
        {
            **BLOCKS,
            **FLOWS,
            **CONFIG,
            **{name: textwrap.dedent(text) for name, text in RELAY.items()},
        }
    )


def _kept(root: Path, run_id: str) -> list[tuple[int, str]]:
    """(seq, the node it goes on to) of the run's rows in inline_steps."""
    with state_db(root) as conn:
        return [
            (int(seq), str(following))
            for seq, following in conn.execute(
                "SELECT seq, next FROM inline_steps WHERE thread_id = ? ORDER BY seq", (run_id,)
            )
        ]


def _finished(root: Path, run_id: str) -> list[str]:
    with state_db(root) as conn:
        return [
            str(row[0])
            for row in conn.execute(
                "SELECT step FROM events WHERE run_id = ? AND type = 'step_finished' ORDER BY seq",
                (run_id,),
            )
        ]


@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
def test_a_failed_run_goes_on_after_the_steps_it_finished_inside_one_node(
    yard: Path, mode: str
) -> None:
    async def main() -> None:
        async with Yard.load(yard) as api:
            seen: dict[str, object] = {}
            async for event in api.astream("relay", {"n": 1}, run_id="r", durability=mode):
                if event.type == "step_started" and event.step == "doze":  # the node sleeps: look
                    seen["rows"], seen["finished"] = _kept(yard, "r"), _finished(yard, "r")
                last = event
            assert last.type == "run_failed" and last.step == "boom"
            if mode == "sync":  # committed before the next step began, with the trace that says so
                assert seen == {"rows": [(0, "two"), (1, "doze")], "finished": ["one", "two"]}
            elif mode == "async":
                # `one`'s row was waited for before `two`'s; `two`'s may still be on its way
                assert seen["rows"] in ([(0, "two")], [(0, "two"), (1, "doze")])
            else:  # exit: nothing written while the run goes on
                assert seen["rows"] == []
            # the node stopped at `boom`: whatever the mode, what it finished before is kept
            assert _kept(yard, "r") == [(0, "two"), (1, "doze"), (2, "boom")]

            (yard / "fixed.flag").write_text("")
            resumed = [event async for event in api.astream_resume("r")]
            assert [e.step for e in resumed if e.type == "step_started"] == ["boom"]
            assert resumed[-1].type == "run_finished"
            assert resumed[-1].data["outputs"] == {"n": 3, "echo": "n=3!"}
            assert _kept(yard, "r") == []  # a finished run's last checkpoint holds every step
            assert _finished(yard, "r") == ["one", "two", "doze", "boom"]  # each once

    asyncio.run(main())


def test_a_run_that_finishes_keeps_no_rows_and_only_langgraphs_last_checkpoint(yard: Path) -> None:
    # crashy's `sync` run goes without LangGraph's loop (engine/runtime/direct_runs.py): its rows
    # were all it kept; in `exit` LangGraph keeps its checkpoints
    checkpoints = {}
    with Yard.load(yard) as api:
        for mode in ("sync", "exit"):
            result = api.run("crashy", {"n": 4}, durability=mode)
            assert (result.status, result.outputs) == ("finished", {"n": 5, "label": "small"})
            assert _kept(yard, result.run_id) == []
            with state_db(yard) as conn:
                found = conn.execute(
                    "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''",
                    (result.run_id,),
                ).fetchone()
            checkpoints[mode] = int(found[0])
    assert checkpoints == {"sync": 0, "exit": 1}


def test_a_subflow_that_failed_goes_on_after_the_steps_its_node_finished(yard: Path) -> None:
    async def main() -> None:
        async with Yard.load(yard) as api:
            failed = [event async for event in api.astream("outer", {"n": 1}, run_id="o")]
            assert failed[-1].type == "run_failed"
            # kept under the subflow's own checkpoint namespace (`sub:<task>|a:<task>`)
            assert [following for _seq, following in _kept(yard, "o")] == ["b", "boom"]
            (yard / "fixed.flag").write_text("")
            resumed = [event async for event in api.astream_resume("o")]
            assert [e.step for e in resumed if e.type == "step_started"] == [
                "sub",
                "sub.boom",
                "post",
            ]
            assert resumed[-1].data["outputs"] == {"n": 5, "echo": "n=4!"}
            assert _kept(yard, "o") == []

    asyncio.run(main())


def test_a_flow_with_inline_false_gives_langgraph_a_checkpoint_per_step(yard: Path) -> None:
    (yard / "flows" / "stepwise.yaml").write_text(
        (yard / "flows" / "relay.yaml")
        .read_text()
        .replace("flow: relay", "flow: stepwise\ninline: false")
    )

    async def main() -> None:
        async with Yard.load(yard) as api:
            steps = {}
            for name, run_id in (("stepwise", "w"), ("relay", "r")):
                failed = [event async for event in api.astream(name, {"n": 1}, run_id=run_id)]
                assert failed[-1].type == "run_failed" and failed[-1].step == "boom"
                kept = await api.engine.db.saver.aget_tuple({"configurable": {"thread_id": run_id}})
                # LangGraph's step count at the last checkpoint
                steps[name] = kept.metadata["step"] if kept is not None else None
            # step by step: LangGraph checkpointed after one, two and doze, each its own node and
            # step (after its input and start); inline, without LangGraph's loop
            # (engine/runtime/direct_runs.py): `one`'s node ran the chain, and its table kept what
            # the node finished, all a resume needs
            assert steps == {"stepwise": 3, "relay": None}
            assert _kept(yard, "w") == [] and len(_kept(yard, "r")) == 3
            (yard / "fixed.flag").write_text("")
            resumed = [event async for event in api.astream_resume("w")]
            assert [e.step for e in resumed if e.type == "step_started"] == ["boom"]
            assert resumed[-1].data["outputs"] == {"n": 3, "echo": "n=3!"}
            assert _finished(yard, "w") == ["one", "two", "doze", "boom"]

    asyncio.run(main())


def test_a_map_fan_outs_row_keeps_what_its_items_share_once_and_gives_each_item_back_whole() -> (
    None
):
    context = {"notes": "x" * 50_000}
    base = {"inputs": {"topic": "bees"}, "context": context, "results": []}
    args = [{**base, "loops": {"each.i": i}, "slot": "s"} for i in range(1000)]
    following, value = step_row({"loops": {"each.n": 1000}}, "each.item", args)
    assert following == "items:each.item"
    assert set(value["shared"]) == {"inputs", "context", "results", "slot"}
    assert all(set(own) == {"loops"} for own in value["items"])
    # the context once, not a thousand times
    assert len(repr(value)) < 2 * len(repr(context)) + 100 * len(args)
    back = restored([(3, following, value), (4 + 7, item_next(7), {"loops": {"each.r7": 14}})])
    assert back is not None
    assert back.items == args and back.following == "each.item" and back.seq == 4
    assert back.items_done == {7: {"loops": {"each.r7": 14}}}
    # arguments that share nothing (or are not mappings) are kept as they are
    _, plain = step_row({}, "each.item", [{"a": [1]}, {"a": [1]}])
    assert plain["shared"] == {} and plain["items"] == [{"a": [1]}, {"a": [1]}]
