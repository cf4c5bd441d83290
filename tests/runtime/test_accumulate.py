"""Optional flow outputs (a run may end early) and accumulated step outputs (`reduce: append | merge`)
across loop passes and map items: real yards, real SQLite state, real processes where a crash matters."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import Yard
from tests.runtime.conftest import Outcome, run_engine, spawn

Cli = Callable[..., Outcome]
MakeYard = Callable[[dict[str, str]], Path]

NOTE = """
    block: note
    kind: transform
    inputs: {tag: {type: string}}
    outputs: {notes: {type: array}, files: {type: object}}
    compute: {notes: "[tag]", files: "{tag: tag | upper}"}
"""

EARLY = """
    flow: early
    inputs: {request: {type: string}}
    outputs:
      plan: {}
      files: {optional: true}
      summary: {default: "nothing to build"}
    steps:
      - id: classify
        router:
          value: "{{ inputs.request }}"
          routes:
            - {contains: app, goto: build}
          default: end
      - {id: build, uses: note, with: {tag: "{{ inputs.request }}"}, outputs: {notes: plan}}
      - {id: wrap, uses: note, with: {tag: done}, outputs: {notes: summary, files: extra}}
"""


def test_a_run_that_ends_early_finishes_with_the_outputs_it_has_and_the_defaults(
    make_yard: MakeYard,
) -> None:
    root = make_yard({"blocks/note.yaml": NOTE, "flows/early.yaml": EARLY})
    with Yard.load(root) as yard:
        # `plan` is required, and the router may end the run without it: a warning, then a failed run
        assert [d.code for d in yard.diagnostics] == ["BY409"]
        short = yard.run("early", {"request": "a poem"})
        full = yard.run("early", {"request": "a todo app"})
    assert short.status == "failed" and "without output 'plan'" in (short.error or "")
    assert full.status == "finished"
    assert full.outputs == {
        "plan": ["a todo app"],
        "files": {"a todo app": "A TODO APP"},
        "summary": ["done"],
    }


def test_optional_outputs_let_a_run_end_early(make_yard: MakeYard) -> None:
    root = make_yard(
        {
            "blocks/note.yaml": NOTE,
            "flows/early.yaml": EARLY.replace("plan: {}", "plan: {optional: true}"),
        }
    )
    with Yard.load(root) as yard:
        assert [d.format() for d in yard.diagnostics] == []
        result = yard.run("early", {"request": "a poem"})
        assert result.status == "finished", result.error
        assert result.outputs == {"summary": "nothing to build"}
        record = yard.get_run(result.run_id)
        assert record is not None and record.outputs == {"summary": "nothing to build"}


def test_the_list_form_of_outputs_still_means_required(make_yard: MakeYard, cli: Cli) -> None:
    root = make_yard(
        {
            "blocks/note.yaml": NOTE,
            "flows/early.yaml": EARLY.replace(
                """outputs:
      plan: {}
      files: {optional: true}
      summary: {default: "nothing to build"}""",
                "outputs: [plan]",
            ),
        }
    )
    checked = cli(root, "validate")
    assert checked.code == 0
    assert checked.out.splitlines() == [
        "flows/early.yaml:3:11: warning BY409 flow output 'plan' is not written on the path classify (default "
        "route) → end (step 'build' writes it); runs that end that way fail (declare it `{optional: true}` or give "
        "it a `default:` if that is expected)"
    ]
    assert cli(root, "run", "early", "--input", "request=a poem").code == 1


ROUNDS = """
    flow: rounds
    outputs: [notes, files]
    steps:
      - id: review
        loop:
          max_iterations: 3
          steps:
            - id: workers
              map:
                items: "['a', 'b', 'c']"
                as: f
                max_concurrency: 2
                steps:
                  - id: write
                    uses: note
                    with: {tag: "{{ f }}{{ context.notes | length }}"}
                    outputs: {notes: {reduce: append}, files: {reduce: merge}}
            - id: qa
              uses: note
              with: {tag: "qa{{ context.notes | length }}"}
              outputs: {notes: {reduce: append}, files: {to: files, reduce: merge}}
"""


def test_append_and_merge_accumulate_across_passes_and_items_in_order(make_yard: MakeYard) -> None:
    root = make_yard({"blocks/note.yaml": NOTE, "flows/rounds.yaml": ROUNDS})
    with Yard.load(root) as yard:
        assert [d.format() for d in yard.diagnostics] == []
        result = yard.run("rounds")
    assert result.status == "finished", result.error
    # items in item order (each saw the list as the map started), then the QA step, pass after pass
    assert result.outputs is not None
    assert result.outputs["notes"] == [
        "a0",
        "b0",
        "c0",
        "qa3",
        "a4",
        "b4",
        "c4",
        "qa7",
        "a8",
        "b8",
        "c8",
        "qa11",
    ]
    assert result.outputs["files"] == {tag: tag.upper() for tag in result.outputs["notes"]}


def test_accumulated_keys_start_empty(make_yard: MakeYard) -> None:
    flow = """
        flow: first
        outputs: [notes, seen]
        steps:
          - {id: look, uses: count, with: {items: "{{ context.notes }}"}}
          - {id: add, uses: note, with: {tag: x}, outputs: {notes: {reduce: append}, files: {reduce: merge}}}
    """
    count = """
        block: count
        kind: transform
        inputs: {items: {type: array}}
        outputs: {seen: {type: integer}}
        compute: {seen: "items | length"}
    """
    root = make_yard(
        {"blocks/note.yaml": NOTE, "blocks/count.yaml": count, "flows/first.yaml": flow}
    )
    with Yard.load(root) as yard:
        assert [d.format() for d in yard.diagnostics] == []
        assert yard.run("first").outputs == {"notes": ["x"], "seen": 0}


FLAKY_TOOLS = '''
import asyncio
import time
from pathlib import Path


async def flaky_note(tag: str) -> list:
    """Hangs on its first call with a tag (the step times out and is retried), then answers at once."""
    marker = Path(__file__).parent / f"called-{tag}"
    if not marker.exists():
        marker.write_text("1")
        await asyncio.sleep(30)
    return [tag]


def slow_note(tag: str) -> list:
    """Takes 30 s the first time it is called with a tag (long enough to be killed), then returns at once."""
    marker = Path(__file__).parent / f"slow-{tag}"
    if not marker.exists():
        marker.write_text("1")
        time.sleep(30)
    return [tag]
'''


def _tool_block(name: str, retry: str = "") -> str:
    return f"""
        block: {name}
        kind: tool
        tool: {name}
        inputs: {{tag: {{type: string}}}}
        outputs: {{notes: {{type: array}}}}
        {retry}
    """


def test_a_retried_step_appends_once(make_yard: MakeYard) -> None:
    flow = """
        flow: retried
        outputs: [notes]
        steps:
          - id: passes
            loop:
              max_iterations: 2
              steps:
                - {id: add, uses: flaky_note, with: {tag: "p{{ context.notes | length }}"},
                   outputs: {notes: {reduce: append}}}
    """
    root = make_yard(
        {
            "blockyard.yaml": "tools:\n  flaky_note: {import: 'yardtools:flaky_note'}\n",
            "yardtools.py": FLAKY_TOOLS,
            "blocks/flaky_note.yaml": _tool_block(
                "flaky_note",
                "timeout: 200ms\n        retry: {attempts: 2, initial: 1ms, on: [timeout]}",
            ),
            "flows/retried.yaml": flow,
        }
    )
    with Yard.load(root) as yard:
        result = yard.run("retried")
        assert result.status == "finished", result.error
        assert result.outputs == {"notes": ["p0", "p1"]}
        retries = [e for e in yard.events(result.run_id) if e.type == "warning"]
        assert len(retries) == 2  # each pass failed once and was retried


def test_a_step_killed_mid_append_runs_again_from_its_checkpoint_without_appending_twice(
    make_yard: MakeYard, cli: Cli
) -> None:
    flow = """
        flow: crashing
        outputs: [notes]
        steps:
          - id: passes
            loop:
              max_iterations: 2
              steps:
                - {id: add, uses: slow_note, with: {tag: "p{{ context.notes | length }}"},
                   outputs: {notes: {reduce: append}}}
    """
    root = make_yard(
        {
            "blockyard.yaml": "tools:\n  slow_note: {import: 'yardtools:slow_note'}\n",
            "yardtools.py": FLAKY_TOOLS,
            "blocks/slow_note.yaml": _tool_block("slow_note"),
            "flows/crashing.yaml": flow,
        }
    )
    (root / "slow-p0").write_text("1")  # the first pass is quick; the second sleeps until killed
    child = spawn(root, "run", "crashing", "--json")
    try:
        assert child.stdout is not None
        for line in child.stdout:
            event = json.loads(line)
            if (
                event["type"] == "step_started"
                and event["step"] == "add"
                and event["data"]["inputs"]["tag"] == "p1"
            ):
                break
        else:
            raise AssertionError(
                f"the run ended early: {child.stderr.read() if child.stderr else ''}"
            )
        assert (root / "slow-p1").exists() or _wait_for(root / "slow-p1")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    run_id = event["run_id"]
    done = run_engine(root, "resume", run_id, "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == {"notes": ["p0", "p1"]}


def _wait_for(path: Path) -> bool:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.01)
    return False


def test_a_gated_step_appends_once_after_its_approval(make_yard: MakeYard) -> None:
    flow = """
        flow: gated
        outputs: [notes]
        steps:
          - id: passes
            loop:
              max_iterations: 2
              steps:
                - {id: add, uses: note, with: {tag: "p{{ context.notes | length }}"}, require_approval: true,
                   outputs: {notes: {reduce: append}, files: {reduce: merge}}}
    """
    root = make_yard({"blocks/note.yaml": NOTE, "flows/gated.yaml": flow})
    with Yard.load(root) as yard:
        first = yard.run("gated")
        assert first.status == "waiting"
        second = yard.resume(first.run_id, approve=True)
        assert second.status == "waiting"
    with Yard.open(root) as yard:  # another Yard, as another process would
        done = yard.resume(first.run_id, approve=True)
    assert done.status == "finished", done.error
    assert done.outputs == {"notes": ["p0", "p1"]}


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        (
            "{notes: {reduce: merge}}",
            "flows/bad.yaml:3:67: error BY433 step 'a': `reduce: merge` needs output 'notes' of block 'note' to be "
            "declared `type: object`, and it is `array`",
        ),
        (
            "{files: {reduce: append}}",
            "flows/bad.yaml:3:67: error BY433 step 'a': `reduce: append` needs output 'files' of block 'note' to be "
            "declared `type: array`, and it is `object`",
        ),
    ],
)
def test_reduce_needs_a_list_or_an_object(
    make_yard: MakeYard, cli: Cli, outputs: str, expected: str
) -> None:
    flow = f"""
        flow: bad
        steps:
          - {{id: a, uses: note, with: {{tag: x}}, outputs: {outputs}}}
    """
    root = make_yard({"blocks/note.yaml": NOTE, "flows/bad.yaml": flow})
    checked = cli(root, "validate")
    assert checked.code == 1
    assert checked.out.splitlines() == [expected]


def test_an_accumulated_key_written_another_way_is_refused(make_yard: MakeYard, cli: Cli) -> None:
    flow = """
        flow: bad
        steps:
          - {id: a, uses: note, with: {tag: x}, outputs: {notes: {reduce: append}, files: {reduce: merge}}}
          - {id: b, uses: note, with: {tag: y}}
    """
    root = make_yard({"blocks/note.yaml": NOTE, "flows/bad.yaml": flow})
    checked = cli(root, "validate")
    assert checked.code == 1
    assert checked.out.splitlines() == [
        "flows/bad.yaml:4:10: error BY434 step 'b' writes context key 'files' as output 'files' (replacing its "
        "value), and step 'a' accumulates it with `reduce: merge`; every step writing an accumulated key must "
        "use the same `reduce:` (rename one of the outputs)",
        "flows/bad.yaml:4:10: error BY434 step 'b' writes context key 'notes' as output 'notes' (replacing its "
        "value), and step 'a' accumulates it with `reduce: append`; every step writing an accumulated key must "
        "use the same `reduce:` (rename one of the outputs)",
    ]


def test_graph_marks_accumulating_steps(make_yard: MakeYard, cli: Cli) -> None:
    root = make_yard({"blocks/note.yaml": NOTE, "flows/rounds.yaml": ROUNDS})
    drawn = cli(root, "graph", "rounds")
    assert drawn.code == 0, drawn.err
    assert (
        'write["write<br/>transform note<br/>accumulates notes (append), files (merge)"]'
        in drawn.out
    )


def test_an_optional_subflow_output_may_be_missing_after_the_step(
    make_yard: MakeYard, cli: Cli
) -> None:
    sub = EARLY.replace("flow: early", "flow: sub").replace("plan: {}", "plan: {optional: true}")
    parent = """
        flow: parent
        outputs: {plan: {optional: true}, summary: {}}
        steps:
          - {id: call, flow: sub, with: {request: a poem}}
          - {id: use, uses: note, with: {tag: "{{ context.summary[0] }} {{ context.plan }}"},
             outputs: {notes: n2, files: f2}}
    """
    root = make_yard({"blocks/note.yaml": NOTE, "flows/sub.yaml": sub, "flows/parent.yaml": parent})
    checked = cli(root, "validate")
    assert checked.code == 1
    assert checked.out.splitlines() == [
        "flows/parent.yaml:5:39: error BY404 step 'use': context key 'plan' is written by step 'call', but not on "
        "every path to this step; write it on every path, or read it as context.plan | default(...)"
    ]
    (root / "flows" / "parent.yaml").write_text(
        (root / "flows" / "parent.yaml")
        .read_text()
        .replace("{{ context.plan }}", "{{ context.plan | default('-') }}")
    )
    with Yard.load(root) as yard:
        assert [d.format() for d in yard.diagnostics] == []
        result = yard.run("parent")
    assert result.status == "finished", result.error
    assert result.outputs == {"summary": "nothing to build"}
