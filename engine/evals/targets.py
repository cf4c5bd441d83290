"""What an eval runs on one side of a comparison: its flow, pinned (engine/definitions/pinned.py), or its block alone
as a one-step flow; and whether that changed between the sides.

A side is a loaded yard: the working tree (`head`), or with `--base REV` the yard at that revision, read
with git as `blockyard diff` reads it (engine/review/revisions.py). Cases always come from the working
tree's eval files; each side runs them on its own definitions. Two sides run the same definition when
their pinned digests are equal — the flow, every block, subflow and prompt file it uses, and
blockyard.yaml — and then only the head runs (unless `--all`): nothing changed that could change the
result. The digest is also the flow version `blockyard eval --history` groups results by.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.errors import UsageError
from engine.definitions.closure import flow_problems
from engine.definitions.load import Document
from engine.definitions.pinned import Bundle, make_bundle
from engine.definitions.project import CONFIG_FILE, Definition, Project
from engine.spec import FlowSpec
from engine.spec.common import TypeSpec
from engine.spec.evals import EvalSpec
from engine.validate.semantic import check_closure, check_config_file

HEAD, BASE = "head", "base"
BLOCK_FLOW = (
    "eval__{name}"  # the one-step flow a block eval runs (a name no flow file can clash with)
)


@dataclass
class Side:
    """One side of an eval run: a loaded yard, and what to call it."""

    name: str  # head | base
    label: str  # `working tree`, `HEAD~1 (1a2b3c4)`
    project: Project
    revision: str | None = None  # the commit, when known
    _targets: dict[str, Target] = field(default_factory=dict, repr=False)

    def target(self, spec: EvalSpec) -> Target:
        key = f"flow:{spec.flow}" if spec.flow is not None else f"block:{spec.block}"
        if key not in self._targets:
            self._targets[key] = _target(self, spec)
        return self._targets[key]


@dataclass(frozen=True)
class Target:
    """What an eval runs on a side: a pinned bundle, or why there is none."""

    bundle: Bundle | None = None
    exists: bool = True  # False: no such flow or block on this side (added since the base)
    problem: str | None = None  # why it cannot run here (it does not validate, ...)

    @property
    def digest(self) -> str | None:
        return self.bundle.digest if self.bundle is not None else None

    @property
    def inputs(self) -> dict[str, TypeSpec]:
        return dict(self.bundle.flow.inputs) if self.bundle is not None else {}

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self.bundle.flow.outputs) if self.bundle is not None else ()


def _target(side: Side, spec: EvalSpec) -> Target:
    project = side.project
    if spec.flow is not None:
        if project.flow(spec.flow) is None:
            return Target(
                exists=False,
                problem=f"flow '{spec.flow}' does not exist on the {side.name} side ({side.label})",
            )
        return _pinned(side, project, spec.flow)
    ref = str(spec.block)
    block = project.block(ref)
    if block is None:
        return Target(
            exists=False,
            problem=f"block '{ref}' does not exist on the {side.name} side ({side.label})",
        )
    name = BLOCK_FLOW.format(name=ref.replace("@", "_v"))
    inputs = block.spec.inputs
    data = {
        "flow": name,
        "version": block.spec.version,
        "description": f"Block '{ref}' alone, for an eval.",
        "inputs": {
            key: value.model_dump(by_alias=True, exclude_unset=True)
            for key, value in inputs.items()
        },
        "outputs": list(block.spec.outputs),
        "steps": [
            {"id": "block", "uses": ref, "with": {key: f"{{{{ inputs.{key} }}}}" for key in inputs}}
        ],
    }
    shown = f"<eval>/{name}.yaml"
    definition = Definition(FlowSpec.model_validate(data), Document(Path(shown), shown, data))
    return _pinned(
        side, dataclasses.replace(project, flows={**project.flows, name: definition}), name
    )


def _pinned(side: Side, project: Project, name: str) -> Target:
    """The flow pinned, when its closure validates (as `blockyard run` would refuse it otherwise)."""
    found = [*project.diagnostics]
    config = [d for d in found if d.file == CONFIG_FILE and d.severity == "error"]
    if not config:
        found.extend(check_config_file(project))
        found.extend(check_closure(project, name))
    errors = [d for d in flow_problems(project, found, name) if d.severity == "error"]
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return Target(
            problem=f"it does not validate on the {side.name} side ({side.label}): "
            f"{errors[0].format()}{more}"
        )
    try:
        return Target(make_bundle(project, name))
    except UsageError as exc:
        return Target(problem=f"it cannot be pinned on the {side.name} side ({side.label}): {exc}")
