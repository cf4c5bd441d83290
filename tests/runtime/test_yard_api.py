"""The Python API (docs/runtime.md, Python API): Yard.load/run/astream/resume/compile, in-process and across
processes sharing one database."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Yard
from engine.core.errors import UsageError, ValidationFailed
from engine.core.events import Event
from engine.state import store
from tests.runtime.conftest import subprocess_env
from tests.support import processes
from tests.support.state import state_db

CHILD = Path(__file__).with_name("yard_child.py")


def test_run_returns_a_result_and_records_it(yard: Path, state_backend: str) -> None:
    with Yard.load(yard) as api:
        result = api.run("calc", {"n": 1})
        assert (result.status, result.outputs, result.error, result.flow, result.version) == (
            "finished",
            {"n": 2, "label": "small"},
            None,
            "calc",
            1,
        )
        assert result.ok and result.exit_code == 0
        record = api.get_run(result.run_id)
        assert record is not None and (record.status, record.outputs) == (
            "finished",
            {"n": 2, "label": "small"},
        )
        types = [e.type for e in api.events(result.run_id)]
        assert types[0] == "run_started" and types[-1] == "run_finished"
        assert [r.id for r in api.runs(flow="calc")] == [result.run_id]
    # on Postgres no SQLite file appears beside the yard
    assert (yard / ".blockyard" / "state.db").is_file() == (state_backend == "sqlite")


def test_astream_yields_the_events_in_order(yard: Path) -> None:
    async def main() -> list[Event]:
        async with Yard.load(yard) as api:
            return [event async for event in api.astream("hello", {"name": "Ada"}, run_id="mine")]

    events = asyncio.run(main())
    assert [e.seq for e in events] == list(range(1, 10))  # two of them tokens of the mock's reply
    assert [e.type for e in events].count("model_call") == 1  # the one model call, with its usage
    assert {e.run_id for e in events} == {"mine"}
    assert events[-1].data["outputs"]["loud"] == "GREET: NAME=ADA"


def test_failure_result_then_resume(yard: Path) -> None:
    with Yard.load(yard) as api:
        failed = api.run("fragile")
        assert (failed.status, failed.step, failed.exit_code) == ("failed", "boom", 1)
        assert failed.error == "tool 'explode' failed: RuntimeError: the fuse is lit"
        (yard / "fixed.flag").write_text("")
        done = api.resume(failed.run_id)
        assert (done.status, done.outputs) == ("finished", {"stamp": "v1", "echo": "v1!"})
        with pytest.raises(UsageError, match="already finished"):
            api.resume(failed.run_id)


def test_failed_results_and_usage_errors(yard: Path) -> None:
    with Yard.load(yard) as api:
        timed_out = api.run("timeouty")
        assert (timed_out.status, timed_out.step, timed_out.error) == (
            "failed",
            "sleepy",
            "timed out after 200ms",
        )
        with pytest.raises(UsageError, match="unknown flow 'calk' \\(did you mean 'calc'\\?\\)"):
            api.run("calk")
        with pytest.raises(UsageError, match="input 'n' must be an integer"):
            api.run("calc", {"n": "1"})
        with pytest.raises(UsageError, match="unknown run 'nope'"):
            api.resume("nope")
        api.run("calc", {"n": 1}, run_id="same")
        with pytest.raises(UsageError, match="already taken"):
            api.run("calc", {"n": 1}, run_id="same")


def test_a_broken_flow_is_refused_when_run_not_at_load(yard: Path) -> None:
    (yard / "flows" / "bad.yaml").write_text("flow: bad\nsteps: []\n")
    with Yard.load(yard) as api:  # a broken flow stops itself, not the yard (docs/runtime.md)
        with pytest.raises(ValidationFailed, match="'steps' must not be empty") as caught:
            api.run("bad")
        assert {d.file for d in caught.value.diagnostics} == {"flows/bad.yaml"}
        assert api.run("calc", {"n": 1}).status == "finished"
        with pytest.raises(ValidationFailed, match="'steps' must not be empty"):
            api.validate()  # with no flow named: every error of the yard


def test_sync_api_works_inside_a_running_loop(yard: Path) -> None:
    async def main() -> str:
        with Yard.load(yard) as api:
            return api.run("calc", {"n": 5}).status  # a notebook cell, a server handler...

    assert asyncio.run(main()) == "finished"


def test_compile_gives_the_langgraph_graph(yard: Path) -> None:
    with Yard.load(yard) as api:
        graph = api.compile("hello")
        [(_, steps)] = list(graph.get_subgraphs())  # the flow's graph, inside its standalone graph
        assert {"greet", "shout"} <= set(steps.get_graph().nodes)
        assert api.compile("hello") is graph  # cached per definition digest
    assert not (yard / ".blockyard").exists()  # inspecting opens no database


def test_a_cancelled_run_is_interrupted_and_resumable(yard: Path) -> None:
    async def main() -> tuple[str, str | None, str]:
        async with Yard.load(yard) as api:
            events: list[Event] = []

            async def consume() -> None:
                async for event in api.astream("crashy", run_id="cancel-me"):
                    events.append(event)

            task = asyncio.create_task(consume())
            while not any(e.type == "step_started" and e.step == "nap" for e in events):
                await asyncio.sleep(0.01)
            with pytest.raises(UsageError, match="is still running"):
                await api.aresume("cancel-me")  # owned by this live process
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            record = api.get_run("cancel-me")
            assert record is not None
            resumed = await api.aresume("cancel-me")
            return record.status, record.error_step, resumed.status

    assert asyncio.run(main()) == ("interrupted", "nap", "finished")


def test_a_consumer_that_stops_listening_interrupts_the_run(yard: Path) -> None:
    async def main() -> str | None:
        async with Yard.load(yard) as api:
            stream = api.astream("crashy", run_id="walk-away")
            async for event in stream:
                if event.type == "step_started" and event.step == "nap":
                    break
            await stream.aclose()
            record = api.get_run("walk-away")
            return record.status if record else None

    assert asyncio.run(main()) == "interrupted"


def test_definitions_are_stored_once_per_content(yard: Path) -> None:
    with Yard.load(yard) as api:
        for n in range(3):
            api.run("calc", {"n": n})
        count = api.db.read(
            lambda conn: conn.execute("SELECT COUNT(*) FROM definitions").fetchone()[0]
        )
    assert count == 1


def test_two_processes_run_flows_on_one_database(yard: Path) -> None:
    children = [
        processes.Popen(
            [sys.executable, str(CHILD), str(yard), "calc", "25"],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results = json.loads(out)
        assert [status for status, _ in results] == ["finished"] * 25
        assert [outputs["n"] for _, outputs in results] == list(range(1, 26))
    with state_db(yard) as conn:
        runs = store.list_runs(conn, limit=None)
        assert len(runs) == 50 and {r.status for r in runs} == {"finished"}
        assert len({r.owner_pid for r in runs}) == 2
        for run in runs:
            types = [e.type for e in store.load_events(conn, run.id)]
            assert types == [
                "run_started",
                "step_started",
                "step_finished",
                "step_started",
                "step_finished",
                "run_finished",
            ]


def test_a_waiting_run_is_a_result(yard: Path) -> None:
    with Yard.load(yard) as api:
        result = api.run("gated")
        assert (result.status, result.step, result.exit_code, result.outputs) == (
            "waiting",
            "ok",
            3,
            None,
        )
        assert result.waiting[0]["value"]["message"] == "Proceed with 2?"
        record = api.get_run(result.run_id)
        assert record is not None and record.status == "waiting"
