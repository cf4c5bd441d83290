"""BY860-BY862: a flow's durability must let its runs work (docs/runtime.md, "Durability")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.definitions.project import load_project
from engine.validate import semantic

MakeYard = Callable[[dict[str, str]], Path]

INC = """\
block: inc
kind: transform
inputs: {n: {type: integer}}
outputs: {n: {type: integer}}
compute: {n: "n + 1"}
"""

GATED = """\
flow: gated
durability: none
inputs: {n: {type: integer}}
outputs: [n]
steps:
  - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}}
  - {id: ok, approval: {message: go}}
"""

CALLER = """\
flow: caller
inputs: {n: {type: integer}}
outputs: [n]
steps:
  - {id: inner, flow: inner, with: {n: "{{ inputs.n }}"}}
"""

INNER = """\
flow: inner
durability: sync
inputs: {n: {type: integer}}
outputs: [n]
steps:
  - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}, require_approval: true}
"""

TRACED = """\
flow: traced
durability: async
trace: false
inputs: {n: {type: integer}}
outputs: [n]
steps:
  - {id: a, uses: inc, with: {n: "{{ inputs.n }}"}}
"""


def _found(root: Path) -> list[str]:
    project = load_project(root)
    return [d.format() for d in semantic.check_project(project) if d.code.startswith("BY86")]


def test_a_flow_with_durability_none_cannot_pause(make_yard: MakeYard) -> None:
    root = make_yard({"blocks/inc.yaml": INC, "flows/gated.yaml": GATED})
    assert _found(root) == [
        "flows/gated.yaml:2:13: error BY860 flow 'gated' cannot have durability none: step 'ok' is an approval "
        "gate, and a run with durability none keeps no checkpoint to wait at (use sync, async or exit)"
    ]


def test_exit_and_async_keep_the_checkpoint_a_gate_waits_at(make_yard: MakeYard) -> None:
    for mode in ("exit", "async", "sync"):
        root = make_yard({"blocks/inc.yaml": INC, "flows/gated.yaml": GATED.replace("none", mode)})
        assert _found(root) == [], mode


def test_the_yard_default_none_is_judged_at_each_flow_that_pauses_through_its_subflows(
    make_yard: MakeYard,
) -> None:
    root = make_yard(
        {
            "blocks/inc.yaml": INC,
            "flows/caller.yaml": CALLER,
            "flows/inner.yaml": INNER,
            "blockyard.yaml": "durability: none\n",
        }
    )
    assert _found(root) == [
        "flows/caller.yaml:1:7: error BY861 flow 'caller' gets durability none from blockyard.yaml, but step "
        "'inner.a' is an approval gate, and a run with durability none keeps no checkpoint to wait at (use sync, "
        "async or exit): set durability: sync (or async, exit) on the flow"
    ]  # inner sets its own: fine


def test_trace_false_needs_durability_none(make_yard: MakeYard) -> None:
    root = make_yard({"blocks/inc.yaml": INC, "flows/traced.yaml": TRACED})
    assert _found(root) == [
        "flows/traced.yaml:3:8: error BY862 flow 'traced': trace: false applies only to runs with durability none, "
        "and this flow's durability is async: drop one of them"
    ]
    fine = make_yard({"blocks/inc.yaml": INC, "flows/traced.yaml": TRACED.replace("async", "none")})
    assert _found(fine) == []
