"""What one flow is made of, and which problems of the yard keep it from running.

A flow is judged by its own closure: its file, the blocks its steps use (map items included),
the prompt files those blocks name or include (engine/definitions/prompts.py), the subflows and delegated
flows it reaches and the blocks of those, agent blocks' delegates, and blockyard.yaml. A broken
file outside that closure does not stop it: `run`, `graph`, `test`, the Python API and `serve` all
judge flows this way, while `validate` reports everything. `serve` watches the prompt files of its
flows' closures, and an edited prompt reloads only the flows that use it (engine/serve/watcher.py).

blockyard.yaml counts for every flow: a run pins the whole config and builds its tool registry
and model profiles from it, so a flow cannot run on a config that does not validate (docs/runtime.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.diagnostics import Diagnostic
from engine.definitions.files import Bounds, Refused, TooLarge, located, read_bytes
from engine.definitions.load import MAX_FILE_BYTES, LoadError, load_file
from engine.definitions.project import CONFIG_FILE, Project
from engine.definitions.prompts import referenced
from engine.spec import ModelBlock, StepSpec
from engine.spec.walk import walk_steps

_BLOCK_LINE = re.compile(r"^block:\s*[\"']?([A-Za-z_][A-Za-z0-9_-]*)", re.M)
_FLOW_LINE = re.compile(r"^flow:\s*[\"']?([A-Za-z_][A-Za-z0-9_-]*)", re.M)


@dataclass
class Closure:
    """The files a flow is made of, and the block names it uses (a broken file of such a name
    must not let it fall back silently to another version of the block)."""

    files: set[str] = field(default_factory=set)
    blocks: set[str] = field(default_factory=set)
    flows: set[str] = field(default_factory=set)
    refs: set[str] = field(default_factory=set)  # block references as written ("greet", "greet@2")
    # prompt files its blocks name or include (also in files)
    prompts: set[str] = field(default_factory=set)


def closure(project: Project, name: str) -> Closure:
    """Everything flow `name` depends on, transitively."""
    found = Closure()
    pending = [name]
    while pending:
        flow = pending.pop()
        definition = project.flow(flow)
        if definition is None or flow in found.flows:
            continue
        found.flows.add(flow)
        found.files.add(definition.display)
        steps = [walked.step for walked in walk_steps(definition.spec.steps)]
        step_ids = {step.id for step in steps}
        for step in steps:
            for ref in block_refs(step):
                pending += _use_block(project, ref, found)
            if step.flow:
                pending.append(step.flow)
            # an agent step's delegates: steps of this flow (walked already) or flows
            pending += [
                d for d in step.delegates if d not in step_ids and project.flow(d) is not None
            ]
    return found


def _use_block(project: Project, ref: str, found: Closure) -> list[str]:
    """Add block `ref` and, for an agent block, its delegates (agent blocks or flows); the flows reached."""
    flows: list[str] = []
    pending = [ref]
    while pending:
        current = pending.pop()
        if current in found.refs:
            continue
        found.refs.add(current)
        found.blocks.add(current.partition("@")[0])
        block = project.block(current)
        if block is None:
            continue
        found.files.add(block.display)
        prompt = block.spec.prompt if isinstance(block.spec, ModelBlock) else None
        if prompt is not None:  # a run pins their text: editing one changes the flow
            prompts = referenced(project.root, project.bounds(), prompt)
            found.prompts |= prompts
            found.files |= prompts
        if block.spec.kind != "agent":
            continue
        for delegate in block.spec.delegates:
            if project.block(delegate) is not None:
                pending.append(delegate)
            elif project.flow(delegate) is not None:
                flows.append(delegate)
    return flows


def block_refs(step: StepSpec) -> list[str]:
    refs = [step.uses, step.map.uses if step.map is not None else None]
    return [ref for ref in refs if ref]


def errors_by_file(diagnostics: Iterable[Diagnostic]) -> dict[str, list[Diagnostic]]:
    table: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.severity == "error":
            table.setdefault(diagnostic.file, []).append(diagnostic)
    return table


def problems_of(
    project: Project,
    name: str,
    errors: Mapping[str, list[Diagnostic]],
    broken_blocks: Mapping[str, list[Diagnostic]],
) -> list[Diagnostic]:
    """The errors that keep flow `name` from running (sorted; [] when it may run). A flow missing
    from the project because its own file is broken is found by that file."""
    if project.flow(name) is None:
        files = broken_flow_files(project, errors, name)
        return sorted({d for f in files for d in errors[f]} | set(errors.get(CONFIG_FILE, [])))
    found = closure(project, name)
    problems = {d for f in found.files | {CONFIG_FILE} for d in errors.get(f, [])}
    problems.update(d for block in found.blocks for d in broken_blocks.get(block, []))
    return sorted(problems)


def flow_problems(
    project: Project, diagnostics: Iterable[Diagnostic], name: str
) -> list[Diagnostic]:
    """`problems_of` from a list of diagnostics (every error of the yard, from any check)."""
    errors = errors_by_file(diagnostics)
    return problems_of(project, name, errors, broken_block_names(project, errors))


def broken_flow_files(
    project: Project, errors: Mapping[str, list[Diagnostic]], name: str
) -> list[str]:
    """Broken files of the flows folder that define flow `name` (by their `flow:` line or their file name)."""
    return [
        display
        for display in sorted(errors)
        if _in_folder(project, display, project.config.paths.flows)
        and name
        in {
            Path(display).stem,
            *_declared(project.root / display, display, "flow", _FLOW_LINE, project.bounds()),
        }
    ]


def broken_block_names(
    project: Project, errors: Mapping[str, list[Diagnostic]]
) -> dict[str, list[Diagnostic]]:
    """Block names whose file is broken: a flow using such a name must not silently fall back
    to another version of the block. The names are the file's `block:` value (read from the
    raw text when the YAML no longer parses) and the file name (blocks/<id>.yaml by convention)."""
    names: dict[str, list[Diagnostic]] = {}
    bounds = project.bounds()
    for display, problems in errors.items():
        if not _in_folder(project, display, project.config.paths.blocks):
            continue
        path = project.root / display
        for candidate in {path.stem, *_declared(path, display, "block", _BLOCK_LINE, bounds)}:
            names.setdefault(candidate, []).extend(problems)
    return names


def _in_folder(project: Project, display: str, folder: str | Path) -> bool:
    try:  # by its own name: a link refused for leading out of the yard still breaks its definition
        located(project.root / display).relative_to((project.root / folder).resolve())
    except ValueError:
        return False
    return True


def _declared(
    path: Path, display: str, key: str, line: re.Pattern[str], bounds: Bounds
) -> set[str]:
    try:
        data = load_file(path, display, bounds=bounds).data
    except (LoadError, OSError):
        data = None
    if isinstance(data, dict) and isinstance(data.get(key), str):
        return {data[key]}
    try:  # read like the loader: never a link out of the yard, a FIFO or more than the limit
        text = read_bytes(path, MAX_FILE_BYTES, bounds).decode("utf-8", errors="replace")
    except (Refused, TooLarge, OSError):
        return set()
    return set(line.findall(text))
