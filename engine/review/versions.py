"""The version policy (`blockyard validate --base REV`, `blockyard diff`): what changed since the base
must say so in its `version:` (docs/review.md).

- BY800: a block whose contract (inputs, outputs) or prompt changed while its `version:` did not;
- BY801: a flow whose contract (inputs, outputs) changed while its `version:` did not;
- BY802: a step of a flow the change did not update still runs a block whose contract changed in a
  way that breaks it.

Each is reported in the head's file, at the `version:` (or the name) of the definition, or at the
step's `uses:`.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.core.diagnostics import Diagnostic
from engine.definitions.project import Project, load_project
from engine.review.changes import AFFECTED, CHANGED, RENAMED, YardDiff
from engine.review.compare import Loaded, compare
from engine.review.revisions import Side, sides
from engine.spec.walk import walk_steps


def load_side(side: Side) -> Project:
    """A side's project; an empty one when the yard did not exist at that revision."""
    return load_project(side.root) if side.exists else Project(side.root)


def base_problems(base: str) -> Callable[[Project], list[Diagnostic]]:
    """For `blockyard validate --base REV`: the version policy's findings of a yard (as loaded by
    validate, its working tree) against revision (or folder) `base`, in the yard's files."""

    def check(head: Project) -> list[Diagnostic]:
        with sides(head.root, base, None) as (old, new):
            before = load_side(old)
            return version_problems(
                compare(Loaded(old.label, before), Loaded(new.label, head)), head
            )

    return check


def version_problems(diff: YardDiff, head: Project) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for block in diff.blocks:
        if block.status not in (CHANGED, RENAMED) or block.old_name is not None:
            continue
        old, new = block.versions
        if old != new or new is None:
            continue
        block_def = head.blocks.get(block.name, {}).get(new)
        if block_def is None:
            continue
        what = [c.text for c in block.contract] + block.prompt
        if not what:
            continue
        kinds = " and ".join(
            k for k, v in (("contract", block.contract), ("prompt", block.prompt)) if v
        )
        at = ("version",) if "version" in block_def.doc.data else ("block",)
        found.append(
            block_def.doc.diag(
                at,
                "BY800",
                (
                    f"block '{block.name}' changed its {kinds} ({'; '.join(what[:3])}{'; …' if len(what) > 3 else ''}) "
                    f"but kept version {new}: bump `version:`"
                ),
                key=True,
            )
        )
    for flow in diff.flows:
        if flow.status not in (CHANGED, RENAMED) or flow.old_name is not None:
            continue
        old, new = flow.versions
        contract = [line for line in flow.settings if line.startswith(("inputs", "outputs"))]
        definition = head.flow(flow.name)
        if old != new or not contract or definition is None:
            continue
        at = ("version",) if "version" in definition.doc.data else ("flow",)
        found.append(
            definition.doc.diag(
                at,
                "BY801",
                (
                    f"flow '{flow.name}' changed its contract ({'; '.join(contract[:3])}"
                    f"{'; …' if len(contract) > 3 else ''}) but kept version {new}: bump `version:`"
                ),
                key=True,
            )
        )
    updated = {f.name for f in diff.flows if f.status != AFFECTED}
    for block in diff.blocks:
        for change in block.contract:
            if not change.breaking:
                continue
            for use in change.steps:
                flow_name, _, step_id = use.partition(".")
                definition = head.flow(flow_name)
                if flow_name in updated or definition is None:
                    continue
                walked = next(
                    (w for w in walk_steps(definition.spec.steps) if w.step.id == step_id), None
                )
                if walked is None:
                    continue
                key = "uses" if walked.step.uses else "map"
                found.append(
                    definition.doc.diag(
                        (*walked.path, key),
                        "BY802",
                        (
                            f"step '{step_id}' still runs block '{block.name}', whose contract "
                            "changed in a way that breaks "
                            f"it: {change.text}; update the step (or pin the block version it was written for)"
                        ),
                        key=True,
                    )
                )
    return sorted(set(found))
