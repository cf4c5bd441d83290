"""The group-commit checkpointer under LangGraph: state, history, interrupts, crash recovery,
two processes on one file, and files readable by LangGraph's own SqliteSaver."""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from engine.state import store
from engine.state.checkpointer import StateDB
from tests.support import processes

CHILD = Path(__file__).with_name("saver_child.py")
REPO = Path(__file__).resolve().parents[2]


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def chain(*names: str, gate: str | None = None) -> StateGraph[State, Any, State, State]:
    graph = StateGraph(State)
    for name in names:

        def node(state: State, name: str = name) -> State:
            if name == gate:
                answer = interrupt({"question": f"ok to {name}?"})
                return {"log": [f"{name}:{answer}"]}
            return {"log": [name]}

        graph.add_node(name, node)
    graph.add_edge(START, names[0])
    for first, second in itertools.pairwise(names):
        graph.add_edge(first, second)
    graph.add_edge(names[-1], END)
    return graph


def test_async_run_state_history_and_langgraph_interop(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = StateDB(path)
    app = chain("a", "b", "c").compile(checkpointer=db.saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}

    async def main() -> tuple[Any, Any, int]:
        out = await app.ainvoke({"log": []}, config, durability="sync")
        state = await app.aget_state(config)
        history = [snapshot async for snapshot in app.aget_state_history(config)]
        return out, state, len(history)

    out, state, history = asyncio.run(main())
    db.close()
    assert out["log"] == ["a", "b", "c"]
    assert state.values["log"] == ["a", "b", "c"] and state.next == ()
    assert history == 5  # input, then one checkpoint per superstep (3 nodes + start)
    # the file is an ordinary LangGraph checkpoint database
    with SqliteSaver.from_conn_string(str(path)) as saver:
        other = chain("a", "b", "c").compile(checkpointer=saver)
        assert other.get_state(config).values["log"] == ["a", "b", "c"]


def test_sync_invoke_uses_the_same_saver(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "state.db")
    try:
        app = chain("a", "b").compile(checkpointer=db.saver)
        config: RunnableConfig = {"configurable": {"thread_id": "sync"}}
        assert app.invoke({"log": []}, config)["log"] == ["a", "b"]
        assert app.get_state(config).values["log"] == ["a", "b"]
    finally:
        db.close()


def test_interrupt_then_resume_in_a_new_handle(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    config: RunnableConfig = {"configurable": {"thread_id": "gate"}}
    db = StateDB(path)
    app = chain("draft", "approve", "publish", gate="approve").compile(checkpointer=db.saver)
    first = asyncio.run(app.ainvoke({"log": []}, config, durability="sync"))
    assert "__interrupt__" in first
    db.close()

    db = StateDB(path)  # as another process would
    try:
        app = chain("draft", "approve", "publish", gate="approve").compile(checkpointer=db.saver)
        state = asyncio.run(app.aget_state(config))
        assert state.next == ("approve",)
        done = asyncio.run(app.ainvoke(Command(resume="yes"), config, durability="sync"))
        assert done["log"] == ["draft", "approve:yes", "publish"]
    finally:
        db.close()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.05)


def test_kill_9_loses_no_finished_node(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    child = processes.Popen(
        [sys.executable, str(CHILD), str(path), "crash", "t"],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(tmp_path / "t.marker")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    crashed_pid = int((tmp_path / "t.marker").read_text())
    (tmp_path / "t.marker").unlink()
    done = processes.run(
        [sys.executable, str(CHILD), str(path), "resume", "t"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    log = json.loads(done.stdout)
    # `a` ran once, in the killed process; only `slow` and `b` ran again
    assert log[0] == f"a@{crashed_pid}"
    assert [entry.split("@")[0] for entry in log] == ["a", "slow", "b"]
    assert all(not entry.endswith(f"@{crashed_pid}") for entry in log[1:])


def test_two_processes_write_one_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateDB(path).close()  # create the tables once, as the first process would
    children = [
        processes.Popen(
            [sys.executable, str(CHILD), str(path), "many", f"p{n}", "60"],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert json.loads(out) == [3] * 60
    conn = store.open_existing(path)
    assert conn is not None
    threads = conn.execute("SELECT COUNT(DISTINCT thread_id) FROM checkpoints").fetchone()[0]
    conn.close()
    assert threads == 120
