"""A yard of gated flows (approval steps, require_approval, gates in map/foreach/loop/subflow bodies)
and helpers to run the real CLI in-process and in separate processes."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from engine.state.database import Connection
from tests.runtime.conftest import Outcome
from tests.support.state import state_db

BLOCKS = {
    "blocks/inc.yaml": """
        block: inc
        kind: transform
        inputs: {n: {type: integer, default: 0}}
        outputs: {n: {type: integer}}
        compute: {n: "n + 1"}
    """,
    "blocks/add.yaml": """
        block: add
        kind: transform
        inputs: {a: {type: integer}, b: {type: integer}}
        outputs: {sum: {type: integer}}
        compute: {sum: "a + b"}
    """,
    "blocks/note.yaml": """
        block: note
        kind: transform
        inputs: {text: {type: string}}
        outputs: {note: {type: string}}
        compute: {note: "text"}
    """,
    "blocks/slow.yaml": """
        block: slow
        kind: wait
        duration: 3s
    """,
}

FLOWS = {
    # an approval with typed fields; rejecting goes to a step
    "flows/pay.yaml": """
        flow: pay
        inputs: {amount: {type: integer, default: 10}}
        outputs: [sum, note]
        steps:
          - id: ask
            approval:
              message: "Pay {{ inputs.amount }} plus a tip?"
              fields:
                tip: {type: integer, description: The tip.}
                memo: {type: string, default: thanks}
              approvers: [ada, grace]
              on_reject: refused
          - id: total
            uses: add
            with: {a: "{{ inputs.amount }}", b: "{{ context.tip }}"}
          - id: done
            uses: note
            with: {text: "{{ context.memo }}"}
            goto: end
          - id: refused
            uses: note
            with: {text: "refused"}
            outputs: {note: note}
          - id: zero
            uses: add
            with: {a: 0, b: 0}
    """,
    # require_approval in front of a step; rejecting fails the run
    "flows/guarded.yaml": """
        flow: guarded
        outputs: [n]
        steps:
          - id: first
            uses: inc
          - id: second
            uses: inc
            require_approval: {message: "Bump {{ context.n }} again?", on_reject: fail}
    """,
    # rejecting ends the run early; outputs that exist on both paths
    "flows/ends.yaml": """
        flow: ends
        outputs: [n]
        steps:
          - id: first
            uses: inc
          - id: gate
            approval: {message: "Go on?"}
          - id: second
            uses: inc
    """,
    # timeouts: each on_timeout kind
    "flows/timed.yaml": """
        flow: timed
        inputs: {mode: {type: string, default: approve}}
        outputs: [note]
        steps:
          - id: route
            router:
              value: "{{ inputs.mode }}"
              routes:
                - {equals: reject, goto: by_reject}
                - {equals: step, goto: by_step}
              default: by_approve
          - id: by_approve
            approval:
              message: "Approve in time?"
              fields: {note: {type: string, default: auto-approved}}
              timeout: 10ms
              on_timeout: approve
              on_reject: nope
            goto: end
          - id: by_reject
            approval: {message: "Reject in time?", timeout: 10ms, on_reject: nope}
            goto: end
          - id: by_step
            approval: {message: "Escalate in time?", timeout: 10ms, on_timeout: escalate, on_reject: nope}
            goto: end
          - id: escalate
            uses: note
            with: {text: escalated}
            goto: end
          - id: nope
            uses: note
            with: {text: rejected}
    """,
    # a gate in every item of a map body: several gates wait at once
    "flows/fan.yaml": """
        flow: fan
        inputs: {numbers: {type: array, default: [1, 2, 3]}}
        outputs: [sums]
        steps:
          - id: each
            map:
              items: inputs.numbers
              as: x
              collect: sums
              steps:
                - id: check
                  approval:
                    message: "Item {{ x }}?"
                    fields: {extra: {type: integer, default: 0}}
                - id: plus
                  uses: add
                  with: {a: "{{ x }}", b: "{{ context.extra }}"}
    """,
    # a gate in a foreach body and in a loop body
    "flows/iterate.yaml": """
        flow: iterate
        outputs: [seen, n]
        steps:
          - id: each
            foreach:
              items: "[10, 20]"
              as: x
              collect: seen
              steps:
                - id: ok
                  approval: {message: "Take {{ x }}?"}
                - id: take
                  uses: add
                  with: {a: "{{ x }}", b: 1}
          - id: again
            loop:
              max_iterations: 2
              steps:
                - id: bump
                  uses: inc
                  require_approval: {message: "Round {{ context.n | default(0) }}?"}
    """,
    # a gate inside a subflow
    "flows/inner.yaml": """
        flow: inner
        inputs: {n: {type: integer}}
        outputs: [n]
        steps:
          - id: confirm
            approval: {message: "Inner {{ inputs.n }}?"}
          - id: bump
            uses: inc
            with: {n: "{{ inputs.n }}"}
    """,
    "flows/outer.yaml": """
        flow: outer
        outputs: [n]
        steps:
          - id: sub
            flow: inner
            with: {n: 41}
    """,
    # a slow step after the gate, to kill a resuming process in the middle
    "flows/slowly.yaml": """
        flow: slowly
        outputs: [n]
        steps:
          - id: gate
            approval: {message: "Start?"}
          - id: wait
            uses: slow
          - id: last
            uses: inc
    """,
}


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard({**BLOCKS, **FLOWS})


def state(root: Path) -> AbstractContextManager[Connection]:
    return state_db(root)


def snapshot(root: Path, run_id: str) -> dict[str, Any]:
    """Everything a decision could change: the run row, its events, its gate rows, its checkpoints."""
    with state(root) as conn:
        return {
            "run": conn.execute(
                "SELECT status, owner_pid, error FROM runs WHERE id = ?", (run_id,)
            ).fetchall(),
            "events": conn.execute(
                "SELECT seq, type FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall(),
            "gates": conn.execute(
                "SELECT interrupt_id, status, actor, decision FROM gates WHERE run_id = ? "
                "ORDER BY interrupt_id",
                (run_id,),
            ).fetchall(),
            "checkpoints": conn.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (run_id,)
            ).fetchall(),
        }


def paused(done: Outcome) -> tuple[str, list[dict[str, Any]]]:
    """(run id, approval_required events) of a --json execution that ended waiting."""
    assert done.code == 3, done.err
    events = done.events()
    gates = [e for e in events if e["type"] == "approval_required"]
    assert gates, events
    return gates[0]["run_id"], gates


def decided(root: Path, run_id: str) -> list[dict[str, Any]]:
    with state(root) as conn:
        rows = conn.execute(
            "SELECT data FROM events WHERE run_id = ? AND type = 'approval_decided' ORDER BY seq",
            (run_id,),
        ).fetchall()
    return [json.loads(row[0]) for row in rows]
