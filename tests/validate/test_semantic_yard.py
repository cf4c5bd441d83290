"""The example yard (top-level blocks/ and flows/) is clean, complete, and every semantic code has an example."""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine.definitions.project import Project, load_project
from engine.spec import BLOCK_KINDS, ApprovalSpec, StepSpec
from engine.spec.walk import walk_steps
from engine.validate.codes import SEMANTIC, WARNINGS
from engine.validate.semantic import check_project

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "tests" / "examples"


def _yard() -> Project:
    return load_project(REPO)


def _steps(project: Project) -> list[tuple[str, StepSpec]]:
    return [
        (name, walked.step)
        for name, flow in project.flows.items()
        for walked in walk_steps(flow.spec.steps)
    ]


def test_example_yard_validates_without_any_finding() -> None:
    project = _yard()
    assert [d.format() for d in project.diagnostics] == []
    assert [d.format() for d in check_project(project)] == []


def test_example_files_carry_the_schema_line() -> None:
    for folder, kind in (("blocks", "block"), ("flows", "flow")):
        paths = sorted((REPO / folder).glob("*.yaml"))
        # the example yard's files: a glob of nothing would check nothing
        assert len(paths) > 5, folder
        for path in paths:
            first = path.read_text(encoding="utf-8").splitlines()[0]
            schema = "flowtest" if path.name.endswith(".test.yaml") else kind
            assert first == f"# yaml-language-server: $schema=../schemas/{schema}.schema.json", (
                path.name
            )


def test_hello_stays_simple() -> None:
    hello = _yard().flows["hello"].spec
    assert [(s.id, s.uses) for s in hello.steps] == [("greet", "greet"), ("shout", "shout")]


def test_every_block_kind_is_used_by_a_flow() -> None:
    project = _yard()
    used = {step.uses or (step.map.uses if step.map else None) for _, step in _steps(project)}
    # or by an example plan (plans/, docs/taskplans.md): a block only a plan uses is used too
    used |= {
        step["block_id"]
        for path in (REPO / "plans").glob("*.json")
        for step in json.loads(path.read_text(encoding="utf-8"))["steps"]
    }
    kinds = {project.block(ref).spec.kind for ref in used if ref and project.block(ref)}  # type: ignore[union-attr]
    assert kinds == set(BLOCK_KINDS)
    unused = sorted(set(project.blocks) - {ref.partition("@")[0] for ref in used if ref})
    assert unused == []


def test_every_construct_appears() -> None:
    project = _yard()
    steps = [step for _, step in _steps(project)]
    flows = [flow.spec for flow in project.flows.values()]
    routes = {route.kind for step in steps if step.router for route in step.router.routes}
    found = {
        "needs join": any(len(step.needs) >= 2 for step in steps),
        "goto": any(step.goto for step in steps),
        "decide branches": any(
            step.branches and project.block(step.uses or "").spec.kind == "decide"  # type: ignore[union-attr]
            for step in steps
            if step.uses
        ),
        "router rule kinds": routes == {"contains", "equals", "starts_with", "regex", "expr"},
        "loop until": any(step.loop and step.loop.until for step in steps),
        "back-edge max_visits": any(
            step.max_visits and "on_max_visits" in step.model_fields_set for step in steps
        ),
        "foreach collect": any(step.foreach and step.foreach.collect for step in steps),
        "map concurrency collect": any(
            step.map and step.map.max_concurrency and step.map.collect for step in steps
        ),
        "approval fields": any(step.approval and step.approval.fields for step in steps),
        "require_approval": any(
            isinstance(step.require_approval, ApprovalSpec) or step.require_approval
            for step in steps
        ),
        "subflow": any(step.flow for step in steps),
        "outputs renames": any(step.outputs for step in steps),
        "memory scope": any(flow.memory for flow in flows),
        "schedule": any(flow.schedule for flow in flows),
    }
    assert [name for name, present in found.items() if not present] == []


def test_every_semantic_code_has_an_invalid_example() -> None:
    expected = "".join(
        path.read_text(encoding="utf-8") for path in EXAMPLES.glob("invalid/*/expected.txt")
    )
    shown = set(re.findall(r" (?:error|warning) (BY\d{3}) ", expected))
    assert sorted(set(SEMANTIC) - shown) == []


def test_severity_in_examples_follows_the_registry() -> None:
    paths = sorted(EXAMPLES.glob("invalid/semantic_*/expected.txt"))
    assert len(paths) > 20  # a glob of nothing would check nothing
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            severity, code = re.search(r" (error|warning) (BY\d{3}) ", line).groups()  # type: ignore[union-attr]
            assert (severity == "warning") == (code in WARNINGS), line
