"""The semantic diff of two loaded yards: flows and blocks compared as specs, not as text.

Both sides are compared through their validated models (`model_dump`, defaults left out), so
formatting, comments, key order, quoting and writing a default out are no change. Prompt files
count by their text (and the text of the files they include). What a block change means for the
flows that use it is judged against each step of the head that runs it (docs/review.md).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.core.values import JsonDict
from engine.definitions.closure import block_refs, closure
from engine.definitions.project import BlockDef, FlowDef, Project, is_builtin
from engine.definitions.prompts import PromptFileError, normal, pin, prompt_sources
from engine.review.changes import (
    ADDED,
    AFFECTED,
    CHANGED,
    REMOVED,
    RENAMED,
    BlockDiff,
    ContractChange,
    FlowDiff,
    StepChange,
    YardDiff,
    field_changes,
    short,
)
from engine.spec import BlockSpec, ModelBlock, StepSpec, TypeSpec
from engine.spec.block import called_tools
from engine.spec.flow import enum_text
from engine.spec.walk import BODY_KEYS, walk_steps

CONTRACT = ("inputs", "outputs")
PROMPT = ("prompt",)
MODEL = ("model", "tools", "delegates", "tool", "max_iterations", "mode", "history", "guardrails")
FLOW_CONTRACT = ("inputs", "outputs")
MAX_PROMPT_DIFF = 60  # lines of a prompt's unified diff kept


@dataclass(frozen=True)
class Loaded:
    """One side, loaded: the project and the label the reports show."""

    label: str
    project: Project


def dump(spec: Any) -> JsonDict:
    """A spec as JSON data without its defaults: writing a default out is no change."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    assert isinstance(data, dict)
    return data


def compare(base: Loaded, head: Loaded) -> YardDiff:
    """Everything that differs between the two yards."""
    found = YardDiff(base.label, head.label)
    found.config = field_changes(_config(base.project), _config(head.project))
    found.blocks = _blocks(base.project, head.project)
    changed_blocks = {b.old_name or b.name for b in found.blocks} | {b.name for b in found.blocks}
    found.flows = _flows(
        base.project, head.project, changed_blocks, config_users(base.project, head.project)
    )
    for block in found.blocks:
        block.used_by = sorted(users(head.project, block.name))
        if block.status in (CHANGED, RENAMED):
            _judge(block, base.project, head.project)
    return found


def _config(project: Project) -> JsonDict:
    return dump(project.config) if project.config_doc is not None else {}


def config_users(base: Project, head: Project) -> dict[str, str]:
    """Blocks of the head that a change of blockyard.yaml reaches -> what changed for them: the model
    profile they run on, a tool or MCP server they call, the http_request limits."""
    before, after = base.config, head.config
    models = {
        n for n in {*before.models, *after.models} if before.models.get(n) != after.models.get(n)
    }
    tools = {n for n in {*before.tools, *after.tools} if before.tools.get(n) != after.tools.get(n)}
    for name in {*before.mcp, *after.mcp}:
        if before.mcp.get(name) != after.mcp.get(name):
            tools |= {
                tool
                for server in (before.mcp.get(name), after.mcp.get(name))
                if server is not None
                for tool in server.tools
            }
    if before.http != after.http:
        tools.add("http_request")
    found: dict[str, str] = {}
    for name, versions in head.blocks.items():
        for definition in versions.values():
            spec = definition.spec
            if isinstance(spec, ModelBlock):
                profile = spec.model if isinstance(spec.model, str) else None
                if spec.model is None:
                    profile = "default"
                if profile in models:
                    found[name] = f"model profile {profile}"
            used = set(called_tools(spec)) & tools
            if used:
                found[name] = f"tool {sorted(used)[0]}"
    return found


# ---- blocks --------------------------------------------------------------------------------


def own_blocks(project: Project) -> dict[str, BlockDef]:
    """The yard's own blocks, `name@version` -> definition (the built-in library is no change)."""
    return {
        f"{name}@{version}": definition
        for name, versions in project.blocks.items()
        for version, definition in versions.items()
        if not is_builtin(definition)
    }


def _blocks(base: Project, head: Project) -> list[BlockDiff]:
    old, new = own_blocks(base), own_blocks(head)
    pairs: list[tuple[BlockDef | None, BlockDef | None]] = [
        (old[key], new[key]) for key in old if key in new
    ]
    gone = {key: old[key] for key in old if key not in new}
    come = {key: new[key] for key in new if key not in old}
    # a version bump: the one version left of a name on each side is the same block, changed
    for name in sorted(
        {d.spec.block for d in gone.values()} & {d.spec.block for d in come.values()}
    ):
        before = [key for key, d in gone.items() if d.spec.block == name]
        after = [key for key, d in come.items() if d.spec.block == name]
        if len(before) == 1 and len(after) == 1:
            pairs.append((gone.pop(before[0]), come.pop(after[0])))
    # a rename: a block gone and one come with the same content under another name
    for key, definition in list(gone.items()):
        twin = next((k for k, d in come.items() if _same_content(definition, d, base, head)), None)
        if twin is not None:
            pairs.append((gone.pop(key), come.pop(twin)))
    pairs += [(definition, None) for definition in gone.values()]
    pairs += [(None, definition) for definition in come.values()]
    found = [
        diff for before, after in pairs if (diff := _block(before, after, base, head)) is not None
    ]
    return sorted(found, key=lambda b: (b.name, b.versions[1] or b.versions[0] or 0))


def _same_content(old: BlockDef, new: BlockDef, base: Project, head: Project) -> bool:
    strip = ("block", "version")
    return {k: v for k, v in dump(old.spec).items() if k not in strip} == {
        k: v for k, v in dump(new.spec).items() if k not in strip
    } and prompt_texts(base, old.spec) == prompt_texts(head, new.spec)


def prompt_texts(project: Project, spec: BlockSpec) -> dict[str, str]:
    """What a block's prompt says: the system and user texts, the files they name and every file
    included (a file that cannot be read counts by the reason, which validate reports)."""
    if not isinstance(spec, ModelBlock) or spec.prompt is None:
        return {}
    texts: dict[str, str] = {}
    sources: list[str] = []
    files: list[str] = []
    for part, inline, file in prompt_sources(spec.prompt):
        if inline is not None:
            texts[part] = inline
            sources.append(inline)
        if file is not None:
            files.append(file)
            texts[part] = f"(file {normal(file)})"
    try:
        texts.update(pin(project.root, project.bounds(), sources, files))
    except PromptFileError as exc:
        texts["unreadable"] = str(exc)
    return texts


def _block(
    old: BlockDef | None, new: BlockDef | None, base: Project, head: Project
) -> BlockDiff | None:
    if old is None and new is not None:
        return BlockDiff(new.spec.block, ADDED, new.display, versions=(None, new.spec.version))
    if new is None and old is not None:
        return BlockDiff(
            old.spec.block, REMOVED, None, old.display, versions=(old.spec.version, None)
        )
    assert old is not None and new is not None
    before, after = dump(old.spec), dump(new.spec)
    texts_before, texts_after = prompt_texts(base, old.spec), prompt_texts(head, new.spec)
    renamed = old.spec.block != new.spec.block
    moved = old.display != new.display
    diff = BlockDiff(
        new.spec.block,
        RENAMED if renamed or moved else CHANGED,
        new.display,
        old.display if moved else None,
        old.spec.block if renamed else None,
        (old.spec.version, new.spec.version),
    )
    for key in CONTRACT:
        diff.contract.extend(
            ContractChange(line, False)
            for line in field_changes(before.get(key, {}), after.get(key, {}), key)
        )
    diff.model = field_changes(
        {k: v for k, v in before.items() if k in MODEL},
        {k: v for k, v in after.items() if k in MODEL},
    )
    if before.get("prompt") != after.get("prompt") or texts_before != texts_after:
        diff.prompt = _prompt_lines(texts_before, texts_after)
        diff.prompt_diff = _unified(texts_before, texts_after)
    skip = {*CONTRACT, *MODEL, *PROMPT, "block", "version"}
    rest_before = {k: v for k, v in before.items() if k not in skip}
    rest_after = {k: v for k, v in after.items() if k not in skip}
    diff.other = field_changes(rest_before, rest_after)
    if old.spec.version != new.spec.version:
        diff.other.insert(0, f"version: {old.spec.version} → {new.spec.version}")
    if not (diff.contract or diff.model or diff.prompt or diff.other or renamed or moved):
        return None
    return diff


def _prompt_lines(before: dict[str, str], after: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for key in [*after, *(k for k in before if k not in after)]:
        label = f"prompt.{key}" if key in ("system", "user") else f"prompt file {key}"
        if key not in before:
            lines.append(f"{label} added")
        elif key not in after:
            lines.append(f"{label} removed")
        elif before[key] != after[key]:
            lines.append(f"{label} changed")
    return lines or ["prompt changed"]


def _unified(before: dict[str, str], after: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for key in [*after, *(k for k in before if k not in after)]:
        old, new = before.get(key, ""), after.get(key, "")
        if old != new:
            lines += difflib.unified_diff(
                old.splitlines(), new.splitlines(), f"a/{key}", f"b/{key}", lineterm="", n=1
            )
    return lines[:MAX_PROMPT_DIFF] + (
        [f"… {len(lines) - MAX_PROMPT_DIFF} more lines"] if len(lines) > MAX_PROMPT_DIFF else []
    )


def users(project: Project, block: str) -> set[str]:
    """The flows of `project` whose closure runs block `block` (any version)."""
    return {name for name in project.flows if block in closure(project, name).blocks}


def uses_of(project: Project, block: BlockSpec) -> Iterable[tuple[FlowDef, StepSpec]]:
    """Every step of every flow of `project` that runs exactly this block (its reference resolves to it)."""
    for definition in project.flows.values():
        for walked in walk_steps(definition.spec.steps):
            for ref in block_refs(walked.step):
                found = project.block(ref)
                if (
                    found is not None
                    and found.spec.block == block.block
                    and found.spec.version == block.version
                ):
                    yield definition, walked.step


def _judge(diff: BlockDiff, base: Project, head: Project) -> None:
    """Which contract changes break a step of the head that runs the block, and which are compatible."""
    old = _find(base, diff.old_name or diff.name, diff.versions[0])
    new = _find(head, diff.name, diff.versions[1])
    if old is None or new is None:
        return
    steps = list(uses_of(head, new.spec))
    judged: list[ContractChange] = []
    for name, declared in old.spec.inputs.items():
        if name not in new.spec.inputs:
            breaks = [f"{f.spec.flow}.{s.id}" for f, s in steps if name in _bindings(s)]
            judged.append(ContractChange(f"input '{name}' removed", bool(breaks), breaks))
        elif new.spec.inputs[name] != declared:
            judged.append(_input_changed(name, declared, new.spec.inputs[name], steps))
    for name, declared in new.spec.inputs.items():
        if name not in old.spec.inputs:
            if declared.has_default:
                judged.append(ContractChange(f"input '{name}' added (optional)", False))
            else:
                breaks = [
                    f"{f.spec.flow}.{s.id}" for f, s in steps if not _sourced(name, f, s, head)
                ]
                judged.append(
                    ContractChange(f"input '{name}' added, required", bool(breaks), breaks)
                )
    for name, declared in old.spec.outputs.items():
        if name not in new.spec.outputs:
            breaks = [f"{f.spec.flow}.{s.id}" for f, s in steps if _reads(f, s, name)]
            judged.append(ContractChange(f"output '{name}' removed", bool(breaks), breaks))
        elif new.spec.outputs[name] != declared:
            judged.append(_output_changed(name, declared, new.spec.outputs[name], steps))
    judged += [
        ContractChange(f"output '{name}' added", False)
        for name in new.spec.outputs
        if name not in old.spec.outputs
    ]
    diff.contract = judged


def _find(project: Project, name: str, version: int | None) -> BlockDef | None:
    versions = project.blocks.get(name, {})
    return versions.get(version) if version is not None else None


def _bindings(step: StepSpec) -> JsonDict:
    if step.map is not None and step.map.uses:
        return {**step.with_, **step.map.with_}
    return step.with_


def _sourced(name: str, flow: FlowDef, step: StepSpec, project: Project) -> bool:
    """Whether a step's input `name` has a source without a binding: a flow input or a context key
    some step of the flow writes (the validator checks each path; judged here by name)."""
    if name in _bindings(step) or name in flow.spec.inputs:
        return True
    for walked in walk_steps(flow.spec.steps):
        for ref in block_refs(walked.step):
            block = project.block(ref)
            if block is not None and any(
                walked.step.output_key(o) == name for o in block.spec.outputs
            ):
                return True
    return False


def _reads(flow: FlowDef, step: StepSpec, output: str) -> bool:
    """Whether the flow may read a block output of step `step`: the step maps it, or the context key
    it lands in is named anywhere else in the flow (judged by name: templates are text)."""
    if output in step.outputs:
        return True
    key = step.output_key(output)
    return (
        re.search(rf"\b{re.escape(key)}\b", json.dumps(flow.doc.data, ensure_ascii=False))
        is not None
    )


def _input_changed(
    name: str, old: TypeSpec, new: TypeSpec, steps: list[tuple[FlowDef, StepSpec]]
) -> ContractChange:
    lines = "; ".join(field_changes(dump(old), dump(new)))
    if new.type == "any" and (
        new.enum is None
        or (old.enum is not None and set(map(short, old.enum)) <= set(map(short, new.enum)))
    ):
        return ContractChange(f"input '{name}' widened ({lines})", False)
    if old.has_default and not new.has_default:
        breaks = [f"{f.spec.flow}.{s.id}" for f, s in steps if name not in _bindings(s)]
        return ContractChange(f"input '{name}' lost its default ({lines})", bool(breaks), breaks)
    breaks = [f"{f.spec.flow}.{s.id}" for f, s in steps if name in _bindings(s)]
    if old.type == new.type and old.enum == new.enum:
        return ContractChange(f"input '{name}' changed ({lines})", False)
    return ContractChange(f"input '{name}' changed ({lines})", bool(breaks), breaks)


def _output_changed(
    name: str, old: TypeSpec, new: TypeSpec, steps: list[tuple[FlowDef, StepSpec]]
) -> ContractChange:
    lines = "; ".join(field_changes(dump(old), dump(new)))
    if old.type == new.type and old.enum == new.enum:
        return ContractChange(f"output '{name}' changed ({lines})", False)
    if old.enum is not None and new.enum is not None and old.type == new.type:
        dropped = {enum_text(v) for v in old.enum} - {enum_text(v) for v in new.enum}
        breaks = [
            f"{f.spec.flow}.{s.id}"
            for f, s in steps
            if s.branches is not None and dropped & set(s.branches)
        ]
        return ContractChange(f"output '{name}' changed ({lines})", bool(breaks), breaks)
    breaks = [f"{f.spec.flow}.{s.id}" for f, s in steps if _reads(f, s, name)]
    return ContractChange(f"output '{name}' changed ({lines})", bool(breaks), breaks)


# ---- flows ---------------------------------------------------------------------------------


def own_flows(project: Project) -> dict[str, FlowDef]:
    return dict(project.flows)


def _flows(
    base: Project, head: Project, changed_blocks: set[str], configured: dict[str, str]
) -> list[FlowDiff]:
    old, new = own_flows(base), own_flows(head)
    pairs: list[tuple[FlowDef | None, FlowDef | None]] = [
        (old[name], new[name]) for name in old if name in new
    ]
    gone = {name: d for name, d in old.items() if name not in new}
    come = {name: d for name, d in new.items() if name not in old}
    for name, definition in list(gone.items()):
        stripped = {k: v for k, v in dump(definition.spec).items() if k != "flow"}
        twin = next(
            (
                n
                for n, d in come.items()
                if {k: v for k, v in dump(d.spec).items() if k != "flow"} == stripped
            ),
            None,
        )
        if twin is not None:
            pairs.append((gone.pop(name), come.pop(twin)))
    pairs += [(d, None) for d in gone.values()] + [(None, d) for d in come.values()]
    found: list[FlowDiff] = []
    for before, after in pairs:
        diff = _flow(before, after, head)
        if diff is None and after is not None:
            through = sorted(_through(head, after.spec.flow, changed_blocks))
            used = closure(head, after.spec.flow).blocks
            through += sorted(
                {f"blockyard.yaml ({why})" for block, why in configured.items() if block in used}
            )
            if through:
                diff = FlowDiff(
                    after.spec.flow,
                    AFFECTED,
                    after.display,
                    versions=(after.spec.version, after.spec.version),
                )
                diff.through = through
        if diff is not None:
            found.append(diff)
    changed_flows = {f.name for f in found if f.status != AFFECTED}
    for diff in found:  # a subflow that changed changes its callers
        if head.flow(diff.name) is None:
            continue
        subs = sorted((closure(head, diff.name).flows - {diff.name}) & changed_flows)
        diff.through = sorted({*diff.through, *(f"flow {sub}" for sub in subs)})
        if diff.status not in (AFFECTED, ADDED) and not diff.through:
            diff.through = sorted(_through(head, diff.name, changed_blocks))
    for name in sorted(set(head.flows) - {f.name for f in found}):
        subs = sorted((closure(head, name).flows - {name}) & changed_flows)
        if subs:
            definition = head.flows[name]
            found.append(
                FlowDiff(
                    name,
                    AFFECTED,
                    definition.display,
                    versions=(definition.spec.version,) * 2,
                    through=[f"flow {sub}" for sub in subs],
                )
            )
    return sorted(found, key=lambda f: f.name)


def _through(project: Project, flow: str, changed_blocks: set[str]) -> set[str]:
    return {f"block {name}" for name in closure(project, flow).blocks & changed_blocks}


def _flow(old: FlowDef | None, new: FlowDef | None, head: Project) -> FlowDiff | None:
    if old is None and new is not None:
        return FlowDiff(
            new.spec.flow,
            ADDED,
            new.display,
            versions=(None, new.spec.version),
            steps=[StepChange(w.step.id, ADDED) for w in walk_steps(new.spec.steps)],
        )
    if new is None and old is not None:
        return FlowDiff(
            old.spec.flow,
            REMOVED,
            None,
            old.display,
            versions=(old.spec.version, None),
            steps=[StepChange(w.step.id, REMOVED) for w in walk_steps(old.spec.steps)],
        )
    assert old is not None and new is not None
    renamed, moved = old.spec.flow != new.spec.flow, old.display != new.display
    diff = FlowDiff(
        new.spec.flow,
        RENAMED if renamed or moved else CHANGED,
        new.display,
        old.display if moved else None,
        old.spec.flow if renamed else None,
        (old.spec.version, new.spec.version),
    )
    before, after = dump(old.spec), dump(new.spec)
    settings_before, settings_after = _settings(before), _settings(after)
    diff.settings = field_changes(settings_before, settings_after)
    if old.spec.version != new.spec.version:
        # compared as values: `version: 1` is the default, left out of dump
        diff.settings.insert(0, f"version: {old.spec.version} → {new.spec.version}")
    diff.steps = step_changes(old.spec.steps, new.spec.steps)
    if not (diff.settings or diff.steps or renamed or moved):
        return None
    return diff


def _settings(flow: JsonDict) -> JsonDict:
    """A flow without its name, version (compared on its own) and steps; a list of outputs in any order
    is the same outputs."""
    found = {k: v for k, v in flow.items() if k not in ("steps", "flow", "version")}
    if isinstance(found.get("outputs"), list):
        found["outputs"] = sorted(found["outputs"])
    return found


def step_data(step: StepSpec) -> JsonDict:
    """A step without its id and its bodies' steps (those are compared as steps of their own)."""
    data = dump(step)
    data.pop("id", None)
    for key in BODY_KEYS:
        if isinstance(data.get(key), dict):
            data[key] = {k: v for k, v in data[key].items() if k != "steps"}
    return data


def _places(steps: list[StepSpec]) -> dict[str, tuple[str, StepSpec]]:
    """step id -> (the step that owns its list, or '' at the top; the step)."""
    return {
        w.step.id: (w.list.owner.id if w.list.owner is not None else "", w.step)
        for w in walk_steps(steps)
    }


def step_changes(old: list[StepSpec], new: list[StepSpec]) -> list[StepChange]:
    """Steps added, removed and changed (by id), in the head's order, then the removed ones."""
    before, after = _places(old), _places(new)
    order_before = {step_id: n for n, step_id in enumerate(before)}
    found: list[StepChange] = []
    for step_id, (owner, step) in after.items():
        if step_id not in before:
            found.append(StepChange(step_id, ADDED))
            continue
        old_owner, old_step = before[step_id]
        details = field_changes(step_data(old_step), step_data(step))
        if owner != old_owner:
            details.insert(0, f"moved from {_owner(old_owner)} into {_owner(owner)}")
        if details:
            found.append(StepChange(step_id, CHANGED, details))
    # list order is part of the graph: a step that moved within its list changes its edges (shown there)
    gone = sorted(set(before) - set(after), key=lambda step_id: order_before[step_id])
    found += [StepChange(step_id, REMOVED) for step_id in gone]
    return found


def _owner(owner: str) -> str:
    return f"the body of '{owner}'" if owner else "the top level"
