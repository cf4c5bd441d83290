"""A pinned, self-contained definition of one flow: the flow, every block and subflow it uses,
and the project config. Runs store their bundle by content hash, so a paused or crashed run
resumes on exactly the definition it started with (docs/runtime.md, Pinning), whatever the files
say now.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError
from engine.core.values import JsonDict
from engine.definitions.files import Refused, TooLarge, read_bytes
from engine.definitions.project import Project, content_hash, relative
from engine.definitions.prompts import PromptFileError, normal, pin, prompt_sources, resolved_prompt
from engine.spec import BlockSpec, ConfigSpec, FlowSpec, ModelBlock, parse_block
from engine.spec.durability import gate_of
from engine.spec.walk import walk_steps

MAX_PROGRAM_BYTES = 16 * 2**20  # a compiled DSPy program with its demos; far above any real one


@dataclass(frozen=True)
class Bundle:
    flow: FlowSpec
    blocks: dict[str, BlockSpec]  # keyed by the reference as written in steps: "greet" or "greet@2"
    flows: dict[str, Bundle]  # subflows by name
    config: ConfigSpec
    source: JsonDict = field(repr=False, compare=False, default_factory=dict)
    # compiled DSPy programs by block ref
    programs: JsonDict = field(repr=False, default_factory=dict)
    # the text of the prompt files its blocks name or include, pinned: name (relative to the yard) -> text
    prompts: dict[str, str] = field(repr=False, default_factory=dict)

    @property
    def name(self) -> str:
        return self.flow.flow

    @property
    def version(self) -> int:
        return self.flow.version

    @property
    def digest(self) -> str:
        return content_hash(self.source)

    def block(self, ref: str) -> BlockSpec:
        return self.blocks[ref]

    def gate(self) -> str | None:
        """The first gate a run of the flow may wait at for a person (engine/spec/durability.py's
        `gate_of`), its subflows' and its agents' tool calls included; None when it never waits."""
        flows: dict[str, FlowSpec] = {}
        blocks: dict[str, BlockSpec] = {}
        pending: list[Bundle] = [self]
        while pending:  # every subflow at any depth, and the blocks each uses, by reference
            current = pending.pop()
            for ref, spec in current.blocks.items():
                blocks.setdefault(ref, spec)
            for name, sub in current.flows.items():
                if name not in flows:
                    flows[name] = sub.flow
                    pending.append(sub)
        return gate_of(self.flow, flows.get, blocks.get)

    def to_json(self) -> str:
        return json.dumps(self.source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Bundle:
        return cls.from_source(json.loads(text))

    @classmethod
    def from_source(cls, source: JsonDict) -> Bundle:
        prompts = dict(source.get("prompts") or {})
        return cls(
            flow=FlowSpec.model_validate(source["flow"]),
            blocks={ref: block_spec(data, prompts) for ref, data in source["blocks"].items()},
            flows={name: cls.from_source(sub) for name, sub in source["flows"].items()},
            config=ConfigSpec.model_validate(source["config"]),
            source=source,
            programs=dict(source.get("programs") or {}),
            prompts=prompts,
        )


def block_spec(data: JsonDict, prompts: dict[str, str]) -> BlockSpec:
    """A pinned block, its `system_file` / `user_file` replaced by the pinned text of those files."""
    spec = parse_block(data)
    prompt = spec.prompt if isinstance(spec, ModelBlock) else None
    if prompt is None or (prompt.system_file is None and prompt.user_file is None):
        return spec
    texts = resolved_prompt(prompt, prompts)
    return spec.model_copy(
        update={
            "prompt": prompt.model_copy(update={**texts, "system_file": None, "user_file": None})
        }
    )


def _pin_prompts(project: Project, name: str, blocks: dict[str, JsonDict]) -> dict[str, str]:
    """The prompt files the blocks name (`system_file`, `user_file`) or include, read now."""
    pinned: dict[str, str] = {}
    for ref, data in blocks.items():
        spec = parse_block(data)
        if not isinstance(spec, ModelBlock) or spec.prompt is None:
            continue
        sources: list[str] = []
        files: list[str] = []
        for _part, inline, file in prompt_sources(spec.prompt):
            if inline is not None:
                sources.append(inline)
            if file is not None:
                files.append(file)
        if not sources and not files:
            continue
        try:
            found = pin(project.root, project.bounds(), sources, files)
        except PromptFileError as exc:
            raise UsageError(f"flow '{name}', block '{ref}': {exc}") from None
        pinned.update({normal(key): text for key, text in found.items()})
    return pinned


def make_bundle(project: Project, name: str, _stack: tuple[str, ...] = ()) -> Bundle:
    """The bundle of flow `name`; raises UsageError for an unknown flow."""
    definition = project.flow(name)
    if definition is None:
        raise UsageError(
            f"unknown flow '{name}'{did_you_mean(name, project.flows)}"
            + ("" if project.flows else " (the yard has no flows)")
        )
    if name in _stack:
        raise UsageError(f"flow '{name}' includes itself through {' -> '.join((*_stack, name))}")
    blocks: dict[str, JsonDict] = {}
    flows: dict[str, Bundle] = {}
    programs: JsonDict = {}
    steps = [walked.step for walked in walk_steps(definition.spec.steps)]
    step_ids = {step.id for step in steps}
    for step in steps:
        refs = [step.uses] if step.uses else []
        if step.map is not None and step.map.uses:
            refs.append(step.map.uses)
        for ref in refs:
            block = project.block(ref)
            if block is None:
                raise UsageError(f"flow '{name}' step '{step.id}' uses unknown block '{ref}'")
            _pin_block(project, ref, block, blocks, programs)
        subflows = [step.flow] if step.flow else []
        # an agent step's delegates: steps of the flow (pinned above) or flows
        subflows += [d for d in step.delegates if d not in step_ids and project.flow(d) is not None]
        for sub in subflows:
            if sub not in flows:
                flows[sub] = make_bundle(project, sub, (*_stack, name))
    for ref in list(blocks):  # agent blocks' delegates, and theirs: agent blocks or flows
        _pin_delegates(project, name, _stack, blocks, flows, programs, ref)
    config = project.config_doc.data if project.config_doc is not None else {}
    source = {
        "flow": definition.doc.data,
        "blocks": blocks,
        "flows": {sub: bundle.source for sub, bundle in flows.items()},
        "config": config,
    }
    if programs:  # only then: bundles without compiled programs keep their digest
        source["programs"] = programs
    prompts = _pin_prompts(project, name, blocks)
    if prompts:  # likewise: the prompt files' text is part of the definition (and its digest)
        source["prompts"] = prompts
    return Bundle(
        definition.spec,
        {ref: block_spec(d, prompts) for ref, d in blocks.items()},
        flows,
        project.config,
        source,
        programs,
        prompts,
    )


def _pin_block(
    project: Project, ref: str, block: Any, blocks: dict[str, JsonDict], programs: JsonDict
) -> None:
    """Pin a block, and the compiled DSPy program saved next to a smart block (blocks/<file>.dspy.json)."""
    blocks[ref] = block.doc.data
    if block.spec.kind != "smart" or ref in programs:
        return
    path = program_path(block.doc.path)
    # read like a definition: never through a link out of the yard, bounded
    if os.path.lexists(path):
        shown = relative(path, project.root)
        try:
            programs[ref] = json.loads(read_bytes(path, MAX_PROGRAM_BYTES, project.bounds(), shown))
        except Refused as refusal:
            raise UsageError(f"block '{block.spec.block}': {refusal.message}") from None
        except TooLarge:
            raise UsageError(
                f"block '{block.spec.block}': its compiled program {shown} is larger than "
                f"{MAX_PROGRAM_BYTES // 2**20} MiB"
            ) from None
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"block '{block.spec.block}': cannot read its compiled program {shown}: {exc}"
            ) from None


def _pin_delegates(
    project: Project,
    name: str,
    stack: tuple[str, ...],
    blocks: dict[str, JsonDict],
    flows: dict[str, Bundle],
    programs: JsonDict,
    ref: str,
) -> None:
    pending = [ref]
    while pending:
        spec = parse_block(blocks[pending.pop()])
        for delegate in spec.delegates if spec.kind == "agent" else []:
            block = project.block(delegate)
            if block is not None and block.spec.kind == "agent":
                if delegate not in blocks:
                    _pin_block(project, delegate, block, blocks, programs)
                    pending.append(delegate)
            elif project.flow(delegate) is not None and delegate not in flows:
                flows[delegate] = make_bundle(project, delegate, (*stack, name))


def program_path(block_file: Path) -> Path:
    """Where `blockyard optimize` saves a smart block's compiled program: next to the block file."""
    return block_file.with_name(block_file.stem + ".dspy.json")
