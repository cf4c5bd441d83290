"""A map killed (kill -9) while its items finish one by one, then resumed: the trace says each item
finished exactly once (docs/runtime.md, "The state database"). An item's result is kept as LangGraph
pending writes as soon as the item finishes, long before the checkpoint of the map's superstep; its
`step_finished` row is committed in the same transaction (engine/state/durable.py, `_task_trace`).
On both backends: the Postgres pass runs it on the suite's throw-away cluster (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.runtime.conftest import Outcome, spawn
from tests.support.state import state_db

Cli = Callable[..., Outcome]
MakeYard = Callable[[dict[str, str]], Path]

ITEMS = 6
STAGGER = 0.15  # item n (1-based) sleeps n * STAGGER: the items finish one after another

FILES = {
    "blockyard.yaml": "tools:\n  doze: {import: 'yardtools:doze'}\n",
    "yardtools.py": f'''
import asyncio


async def doze(n: int) -> str:
    """Sleeps longer for each later item, so that the items of a map finish one by one."""
    await asyncio.sleep({STAGGER} * n)
    return f"item {{n}}"
''',
    "blocks/doze.yaml": """
        block: doze
        kind: tool
        tool: doze
        inputs: {n: {type: integer}}
        outputs: {echo: {type: string}}
    """,
    "flows/fan.yaml": f"""
        flow: fan
        outputs: [echoes]
        steps:
          - id: fan
            map: {{items: "{list(range(1, ITEMS + 1))}", as: n, uses: doze, with: {{n: "{{{{ n }}}}"}},
                  collect: echoes}}
    """,
}


def _trace(root: Path, run_id: str) -> list[dict[str, Any]]:
    with state_db(root) as conn:
        rows = conn.execute(
            "SELECT type, step, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    return [{"type": type_, "step": step, "data": json.loads(data)} for type_, step, data in rows]


def _status(root: Path, run_id: str) -> str:
    with state_db(root) as conn:
        return str(conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0])


def _kill_after(root: Path, finished: int, pause: float) -> str:
    """Start `blockyard run fan`, kill -9 it `pause` seconds after it printed the `finished`-th item's
    `step_finished` (or when it ended on its own, should it be that slow); the run's id."""
    child = spawn(root, "run", "fan", "--json")
    run_id: str | None = None
    try:
        assert child.stdout is not None
        seen = 0
        for line in child.stdout:
            event = json.loads(line)
            run_id = run_id or event["run_id"]
            if event["type"] == "step_finished" and "index" in event["data"]:
                seen += 1
                if seen == finished:
                    break
        time.sleep(pause)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert run_id is not None, child.stderr.read() if child.stderr else ""
    return run_id


def test_every_item_of_a_map_killed_and_resumed_has_exactly_one_step_finished(
    make_yard: MakeYard, cli: Cli
) -> None:
    root = make_yard(FILES)
    expected = [{"echo": f"item {n}"} for n in range(1, ITEMS + 1)]

    # killed after 1 to 4 items finished, at once or up to 0.1 s later (the next item finishes
    # STAGGER later): the items finished last may or may not have their results committed yet
    @settings(
        max_examples=6,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        finished=st.integers(min_value=1, max_value=4),
        pause=st.floats(min_value=0.0, max_value=0.1),
    )
    def killed_and_resumed(finished: int, pause: float) -> None:
        run_id = _kill_after(root, finished, pause)
        if _status(root, run_id) != "finished":
            # it always is killed in time, short of a very slow machine
            done = cli(root, "resume", run_id, "--json")
            assert done.code == 0, done.err
            assert done.events()[-1]["data"]["outputs"] == {"echoes": expected}
        trace = _trace(root, run_id)
        items = Counter(
            event["data"]["index"]
            for event in trace
            if event["type"] == "step_finished" and "index" in event["data"]
        )
        assert items == dict.fromkeys(range(ITEMS), 1), (
            f"killed after {finished} items and {pause:.3f} s: {items}"
        )
        maps = [
            event
            for event in trace
            if event["type"] == "step_finished" and "index" not in event["data"]
        ]
        assert [event["data"]["outputs"] for event in maps] == [{"echoes": expected}]
        # an item's step_finished carries its own result (not another item's, nor a re-run's)
        for event in trace:
            if event["type"] == "step_finished" and "index" in event["data"]:
                assert event["data"]["outputs"] == expected[event["data"]["index"]]

    killed_and_resumed()
