"""`emit:` custom events: published after the step finishes, with its outputs in scope; stored in the
trace, printed by `run --json`, refused when named like an engine event or reading unknown variables."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.events import Sequencer
from engine.definitions.project import load_project
from engine.runtime.yard import Yard
from engine.validate.semantic import check_project

MakeYard = Callable[[dict[str, str]], Path]

INC = """
block: inc
kind: transform
inputs: {n: {type: integer}}
outputs: {n: {type: integer}}
compute: {n: "n + 1"}
"""
COUNT = """
flow: count
inputs: {start: {type: integer, default: 0}}
outputs: [count]
steps:
  - id: first
    uses: inc
    with: {n: "{{ inputs.start }}"}
    outputs: {n: count}
    emit: {event: progress, data: {done: "{{ context.count }}", of: 3, own: "{{ steps.first.outputs.n }}"}}
  - id: more
    loop:
      max_iterations: 2
      steps:
        - id: again
          uses: inc
          with: {n: "{{ context.count }}"}
          outputs: {n: count}
          emit:
            - {event: progress, data: {done: "{{ context.count }}", label: "step {{ context.count }} of 3"}}
            - {event: tick}
"""


def test_events_follow_their_step_with_its_outputs_in_scope_and_are_stored(
    make_yard: MakeYard,
) -> None:
    root = make_yard({"blocks/inc.yaml": INC, "flows/count.yaml": COUNT})
    with Yard.load(root) as yard:
        result = yard.run("count", {"start": 0}, run_id="c1")
        stored = [e.as_dict() for e in yard.events("c1")]
    assert result.status == "finished" and result.outputs == {"count": 3}
    custom = [
        (e["type"], e["step"], e["data"]) for e in stored if e["type"] in ("progress", "tick")
    ]
    assert custom == [
        ("progress", "first", {"done": 1, "of": 3, "own": 1}),
        ("progress", "again", {"done": 2, "label": "step 2 of 3"}),
        ("tick", "again", {}),
        ("progress", "again", {"done": 3, "label": "step 3 of 3"}),
        ("tick", "again", {}),
    ]
    kinds = [e["type"] for e in stored]
    # right after its step finished
    assert kinds.index("progress") == kinds.index("step_finished") + 1
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))


def test_run_json_prints_custom_events(
    make_yard: MakeYard, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard({"blocks/inc.yaml": INC, "flows/count.yaml": COUNT})
    code = main(["run", "count", "--json", "--root", str(root)])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert code == 0
    assert [e["data"]["done"] for e in events if e["type"] == "progress"] == [1, 2, 3]


def test_a_payload_without_the_mark_or_with_an_engine_name_is_not_a_custom_event() -> None:
    seq = Sequencer("r")
    assert seq.from_custom({"type": "progress", "step": "s", "data": {}}) is None
    assert (
        seq.from_custom({"type": "run_finished", "step": "s", "data": {}, "custom": True}) is None
    )
    event = seq.from_custom({"type": "progress", "step": "s", "data": {"n": 1}, "custom": True})
    assert event is not None and (event.type, event.data) == ("progress", {"n": 1})


def test_a_value_that_fails_to_render_is_a_warning_not_a_failed_step(make_yard: MakeYard) -> None:
    flow = COUNT.split("  - id: more")[0].replace(
        'own: "{{ steps.first.outputs.n }}"', 'bad: "{{ context.count // 0 }}"'
    )
    root = make_yard({"blocks/inc.yaml": INC, "flows/count.yaml": flow})
    with Yard.load(root) as yard:
        result = yard.run("count", {}, run_id="c2")
        stored = [e.as_dict() for e in yard.events("c2")]
    assert result.status == "finished"
    warnings = [e["data"] for e in stored if e["type"] == "warning"]
    assert [w["code"] for w in warnings] == ["emit_failed"] and "progress" in warnings[0]["message"]
    assert "progress" not in [e["type"] for e in stored]


def problems(make_yard: MakeYard, flow: str) -> list[str]:
    project = load_project(make_yard({"blocks/inc.yaml": INC, "flows/count.yaml": flow}))
    assert [d.format() for d in project.diagnostics] == []
    return [d.format() for d in check_project(project)]


def test_the_example_flow_is_clean(make_yard: MakeYard) -> None:
    assert problems(make_yard, COUNT) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("event: tick", "event: step_finished"),
            "flows/count.yaml:20:23: error BY425 step 'again': event name 'step_finished' is "
            "one of the engine's own event",
        ),
        (
            ("event: tick", "event: token"),
            "flows/count.yaml:20:23: error BY425 step 'again': event name 'token'",
        ),
        (
            ('{{ context.count }}", of: 3', '{{ context.cont }}", of: 3'),
            "flows/count.yaml:9:42: error BY404 step 'first': no step writes context key 'cont' "
            "(did you mean 'count'?)",
        ),
        (
            ('own: "{{ steps.first', 'own: "{{ stepz.first'),
            "flows/count.yaml:9:77: error BY401 step 'first': unknown variable 'stepz'",
        ),
        (
            ("{{ steps.first.outputs.n }}", "{{ steps.more.outputs.n }}"),
            "flows/count.yaml:9:77: error BY403 step 'first': step 'more' does not finish before this step",
        ),
    ],
)
def test_mistakes_in_emit_are_reported_at_line_and_column(
    make_yard: MakeYard, change: tuple[str, str], expected: str
) -> None:
    found = problems(make_yard, COUNT.replace(*change))
    assert any(line.startswith(expected) for line in found), found
