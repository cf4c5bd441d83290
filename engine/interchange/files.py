"""Writing a converted flow (and the new blocks it needs) into a yard, then validating it like any
file of the yard: `blockyard import reactflow|taskplan`, `blockyard compose`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from engine.core.diagnostics import Diagnostic
from engine.core.errors import UsageError
from engine.core.values import JsonDict
from engine.definitions.project import Project, load_project, relative
from engine.spec.common import file_name_problem
from engine.validate.semantic import check_project


@dataclass
class Written:
    flow: Path
    blocks: list[Path]
    reused: dict[str, str]  # node or step -> the existing block it runs
    problems: list[Diagnostic]  # what the validator says about the written files

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.problems)


def dump(data: JsonDict, header: str) -> str:
    return f"# {header}\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)


def check_name(name: object, what: str, kind: str = "flow") -> str:
    """`name` when it can name a flow's or block's file (engine/spec/common.py, `file_name_problem`);
    UsageError (exit 2, HTTP 422) before anything is written otherwise: a name is never a path."""
    text = name if isinstance(name, str) else str(name)
    problem = file_name_problem(text, kind) if isinstance(name, str) else f"a {kind}'s name is text"
    if problem is not None:
        shown = text if len(text) <= 80 else f"{text[:60]}...{text[-10:]}"
        shown = shown if shown.isprintable() else repr(shown)[1:-1]
        raise UsageError(f"{what} '{shown}': {problem}")
    return text


def write_flow(
    project: Project,
    flow: JsonDict,
    blocks: dict[str, JsonDict],
    *,
    origin: str,
    force: bool,
    reused: dict[str, str] | None = None,
) -> Written:
    """Write flows/<flow>.yaml and blocks/<name>.yaml (never over an existing file unless `force`), then
    validate the yard and keep the problems of the files written. Every name is checked first: a flow's
    or block's name that is not one (a path, too long) writes nothing."""
    check_name(flow.get("flow"), "the flow's name")
    for name in blocks:
        check_name(name, "block name", "block")
    root = project.root
    flow_path = root / project.config.paths.flows / f"{flow['flow']}.yaml"
    block_paths = {name: root / project.config.paths.blocks / f"{name}.yaml" for name in blocks}
    existing = [p for p in (flow_path, *block_paths.values()) if os.path.lexists(p)]
    if existing and not force:
        shown = ", ".join(relative(p, root) for p in existing)
        raise UsageError(
            f"{shown} already exists; choose another --name, or pass --force to replace it"
        )
    if (
        flow["flow"] in project.flows
        and project.flows[flow["flow"]].doc.path.resolve() != flow_path.resolve()
    ):
        raise UsageError(
            f"flow '{flow['flow']}' is already defined in {project.flows[flow['flow']].display}"
        )
    for name, data in blocks.items():
        block_paths[name].parent.mkdir(parents=True, exist_ok=True)
        block_paths[name].write_text(dump(data, f"Made by {origin}"), encoding="utf-8")
    flow_path.parent.mkdir(parents=True, exist_ok=True)
    flow_path.write_text(
        dump(
            flow,
            f"Made by {origin}; review it like any flow (docs/reactflow.md, docs/taskplans.md).",
        ),
        encoding="utf-8",
    )
    after = load_project(root)
    mine = {relative(p, root) for p in (flow_path, *block_paths.values())}
    found = [*after.diagnostics, *check_project(after)]
    problems = sorted({d for d in found if d.file in mine})
    return Written(flow_path, list(block_paths.values()), dict(reused or {}), problems)
