"""A pinned, self-contained definition of one flow: the flow, every block and subflow it uses,
and the project config. Runs store their bundle by content hash, so a paused or crashed run
resumes on exactly the definition it started with (DESIGN.md §5), whatever the files say now.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.diagnostics import did_you_mean
from engine.errors import UsageError
from engine.project import Project, content_hash
from engine.spec import BlockSpec, ConfigSpec, FlowSpec


@dataclass(frozen=True)
class Bundle:
    flow: FlowSpec
    blocks: dict[str, BlockSpec]  # keyed by the reference as written in steps: "greet" or "greet@2"
    flows: dict[str, Bundle]  # subflows by name
    config: ConfigSpec
    source: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

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

    def to_json(self) -> str:
        return json.dumps(self.source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Bundle:
        return cls.from_source(json.loads(text))

    @classmethod
    def from_source(cls, source: dict[str, Any]) -> Bundle:
        return cls(
            flow=FlowSpec.model_validate(source["flow"]),
            blocks={ref: BlockSpec.model_validate(data) for ref, data in source["blocks"].items()},
            flows={name: cls.from_source(sub) for name, sub in source["flows"].items()},
            config=ConfigSpec.model_validate(source["config"]),
            source=source,
        )


def make_bundle(project: Project, name: str, _stack: tuple[str, ...] = ()) -> Bundle:
    """The bundle of flow `name`; raises UsageError for an unknown flow."""
    definition = project.flow(name)
    if definition is None:
        raise UsageError(f"unknown flow '{name}'{did_you_mean(name, project.flows)}"
                         + ("" if project.flows else " (the yard has no flows)"))
    if name in _stack:
        raise UsageError(f"flow '{name}' includes itself through {' -> '.join((*_stack, name))}")
    blocks: dict[str, dict[str, Any]] = {}
    flows: dict[str, Bundle] = {}
    for step, _path in definition.spec.walk():
        refs = [step.uses] if step.uses else []
        if step.map is not None and step.map.uses:
            refs.append(step.map.uses)
        for ref in refs:
            block = project.block(ref)
            if block is None:
                raise UsageError(f"flow '{name}' step '{step.id}' uses unknown block '{ref}'")
            blocks[ref] = block.doc.data
        if step.flow and step.flow not in flows:
            flows[step.flow] = make_bundle(project, step.flow, (*_stack, name))
    config = project.config_doc.data if project.config_doc is not None else {}
    source = {
        "flow": definition.doc.data,
        "blocks": blocks,
        "flows": {sub: bundle.source for sub, bundle in flows.items()},
        "config": config,
    }
    return Bundle(definition.spec, {ref: BlockSpec.model_validate(d) for ref, d in blocks.items()},
                  flows, project.config, source)
